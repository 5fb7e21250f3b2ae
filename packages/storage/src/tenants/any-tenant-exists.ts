import { executorOf, type StorageOrTransaction } from "../executor.js";

/** Whether any tenant exists yet (first start creates the default one only when none does). */
export async function anyTenantExists(target: StorageOrTransaction): Promise<boolean> {
  return (await executorOf(target).selectFrom("tenants").select("id").limit(1).executeTakeFirst()) !== undefined;
}
