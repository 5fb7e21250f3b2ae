import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Source bytes a tenant uploaded at or after `since`: part bytes of streamed archives (origin
 * `uploaded`; parts it already held and reused are free) and the bytes of inline
 * (schema_version 1) sources its accepted jobs carried. The one definition of "bytes uploaded
 * this period": the tenant's consumption (readTenantConsumption), the bandwidth check at
 * sources.reserve, sources.chunk.put and an inline jobs.submit, and the usage ledger's upload
 * records (listUploadedBytes) all count these same rows.
 */
export async function sumUploadedBytes(
  target: StorageOrTransaction,
  input: { tenantId: string; since: Date },
): Promise<number> {
  const db = executorOf(target);
  const since = formatTimestamp(input.since);
  const parts = await db
    .selectFrom("source_upload_parts")
    .select((eb) => eb.fn.coalesce(eb.fn.sum<number>("bytes"), eb.lit(0)).as("n"))
    .where("tenant_id", "=", input.tenantId)
    .where("origin", "=", "uploaded")
    .where("received_at", ">=", since)
    .executeTakeFirst();
  const inline = await db
    .selectFrom("inline_source_bytes")
    .select((eb) => eb.fn.coalesce(eb.fn.sum<number>("bytes"), eb.lit(0)).as("n"))
    .where("tenant_id", "=", input.tenantId)
    .where("received_at", ">=", since)
    .executeTakeFirst();
  // PostgreSQL's sum of a bigint is numeric, which pg returns as text.
  return Number(parts?.n ?? 0) + Number(inline?.n ?? 0);
}
