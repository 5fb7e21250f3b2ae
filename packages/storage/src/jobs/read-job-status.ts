import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * A tenant's job's current status, and nothing else (a stream polls it); undefined for
 * another tenant's job or an unknown id.
 */
export async function readJobStatus(
  target: StorageOrTransaction,
  input: { tenantId: string; jobId: string },
): Promise<string | undefined> {
  const row = await executorOf(target)
    .selectFrom("jobs")
    .select("status")
    .where("id", "=", input.jobId)
    .where("tenant_id", "=", input.tenantId)
    .executeTakeFirst();
  return row?.status;
}
