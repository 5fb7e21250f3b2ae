import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Records the source bytes a job submitted inline (schema_version 1) carried, received at its
 * acceptance. Called in the job's insert transaction (insertJob's onCreated), so the bytes are
 * counted exactly when the job exists: a replay of the submission creates no job and records
 * nothing, and a refused submission leaves no count.
 */
export async function recordInlineSourceBytes(
  target: StorageOrTransaction,
  input: {
    jobId: string;
    tenantId: string;
    repository: string;
    submittedBy: string;
    bytes: number;
    receivedAt: string;
  },
): Promise<void> {
  await executorOf(target)
    .insertInto("inline_source_bytes")
    .values({
      job_id: input.jobId,
      tenant_id: input.tenantId,
      repository: input.repository,
      submitted_by: input.submittedBy,
      bytes: input.bytes,
      received_at: input.receivedAt,
    })
    .execute();
}
