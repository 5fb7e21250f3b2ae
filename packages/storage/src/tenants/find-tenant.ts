import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type Tenant, tenantFromRow } from "./tenant.js";

export async function findTenant(target: StorageOrTransaction, tenantId: string): Promise<Tenant | undefined> {
  const row = await executorOf(target).selectFrom("tenants").selectAll().where("id", "=", tenantId).executeTakeFirst();
  return row === undefined ? undefined : tenantFromRow(row);
}
