import type { Kysely } from "kysely";
import { answerLostAttempt } from "../jobs/answer-lost-attempt.js";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * An attempt whose reported bytes the retention sweep deleted before its result was published
 * (record-published-blobs.ts) is recorded `lost`, like one whose host stopped renewing its
 * lease: its job goes back to the queue for a new attempt, which stores the bytes again, or
 * settles `failed` with cause infrastructure once it used max_attempts. Nothing of the result is
 * kept, so no artifact is ever served without its bytes. Fenced on the lease like the finish it
 * replaces; answers `stale`, which tells the host its result did not stand.
 */
export async function loseAttemptToSweep(
  trx: Kysely<Database>,
  input: { jobId: string; attempt: number; leaseToken: string; now: Date; rowLocks: boolean; swept: readonly string[] },
): Promise<"stale"> {
  const lost = await trx
    .updateTable("attempts")
    .set({ state: "lost", finished_at: formatTimestamp(input.now), outcome: "lost" })
    .where("job_id", "=", input.jobId)
    .where("number", "=", input.attempt)
    .where("lease_token", "=", input.leaseToken)
    .where("state", "=", "running")
    .executeTakeFirst();
  if (lost.numUpdatedRows === 0n) return "stale";
  const what = `the retention sweep deleted bytes it reported (${input.swept.join(", ")}) before they were published`;
  await answerLostAttempt(trx, {
    jobId: input.jobId,
    attempt: input.attempt,
    rowLocks: input.rowLocks,
    now: input.now,
    reason: `attempt ${input.attempt} lost: ${what}`,
    lossDetail: `attempt ${input.attempt} lost: ${what}`,
    queueAnnotation: `attempt ${input.attempt} lost: its reported bytes were swept before publication; retrying`,
  });
  return "stale";
}
