import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Source part bytes a tenant uploaded (origin `uploaded`; parts it already held and reused are
 * free) received at or after `since`. The one definition of "bytes uploaded this period": the
 * tenant's consumption (readTenantConsumption), the bandwidth check at sources.reserve and
 * sources.chunk.put, and the usage ledger's upload records all count these same rows.
 */
export async function sumUploadedBytes(
  target: StorageOrTransaction,
  input: { tenantId: string; since: Date },
): Promise<number> {
  const row = await executorOf(target)
    .selectFrom("source_upload_parts")
    .select((eb) => eb.fn.coalesce(eb.fn.sum<number>("bytes"), eb.lit(0)).as("n"))
    .where("tenant_id", "=", input.tenantId)
    .where("origin", "=", "uploaded")
    .where("received_at", ">=", formatTimestamp(input.since))
    .executeTakeFirst();
  // PostgreSQL's sum of a bigint is numeric, which pg returns as text.
  return Number(row?.n ?? 0);
}
