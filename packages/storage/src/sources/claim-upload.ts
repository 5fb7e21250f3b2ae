import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Claims a verified, unexpired, unclaimed upload for a job: one upload, one job. Meant to run
 * in the transaction that inserts the job (insertJob's `onCreated`), so the job exists exactly
 * when its source is claimed. The write is a conditional UPDATE: on PostgreSQL a second claim
 * waits for the first's row lock and then finds `claimed_job` set; on SQLite the write lock
 * serializes them. Returns whether this call claimed it.
 */
export async function claimUpload(
  target: StorageOrTransaction,
  input: { tenantId: string; upload: string; manifestSha256: string; jobId: string; now: Date },
): Promise<boolean> {
  const now = formatTimestamp(input.now);
  const result = await executorOf(target)
    .updateTable("source_uploads")
    .set({ claimed_job: input.jobId, claimed_at: now })
    .where("tenant_id", "=", input.tenantId)
    .where("upload", "=", input.upload)
    .where("manifest_sha256", "=", input.manifestSha256)
    .where("state", "=", "verified")
    .where("claimed_job", "is", null)
    .where("cleaned_at", "is", null)
    .where("expires_at", ">", now)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
