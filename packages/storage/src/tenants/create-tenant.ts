import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { type Tenant, tenantFromRow } from "./tenant.js";

/**
 * Creates a tenant, or returns the existing one with `created: false` — first start and
 * `admin tenant create` may both run, in different processes, and neither should fail.
 * The display name defaults to the id.
 */
export async function createTenant(
  target: StorageOrTransaction,
  input: { id: string; displayName?: string },
  now: Date,
): Promise<{ tenant: Tenant; created: boolean }> {
  const db = executorOf(target);
  const inserted = await db
    .insertInto("tenants")
    .values({ id: input.id, display_name: input.displayName ?? input.id, created_at: formatTimestamp(now) })
    .onConflict((conflict) => conflict.column("id").doNothing())
    .executeTakeFirst();
  const row = await db.selectFrom("tenants").selectAll().where("id", "=", input.id).executeTakeFirstOrThrow();
  return { tenant: tenantFromRow(row), created: inserted.numInsertedOrUpdatedRows === 1n };
}
