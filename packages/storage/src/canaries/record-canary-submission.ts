import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Records what submitting a reserved canary gave: its job, or why the public API refused it. */
export async function recordCanarySubmission(
  target: StorageOrTransaction,
  input: { id: string; now: Date } & ({ jobId: string } | { error: string }),
): Promise<void> {
  await executorOf(target)
    .updateTable("canaries")
    .set({
      submitted_at: formatTimestamp(input.now),
      ...("jobId" in input ? { job_id: input.jobId } : { submission_error: input.error.slice(0, 2000) }),
    })
    .where("id", "=", input.id)
    .execute();
}
