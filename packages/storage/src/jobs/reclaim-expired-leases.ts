import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";
import { answerLostAttempt } from "./answer-lost-attempt.js";

/**
 * Attempts whose host stopped renewing the lease are recorded `lost`; their job goes
 * back to the queue as a new attempt, or fails with cause infrastructure once it has
 * used max_attempts. The attempt UPDATE is conditional on the expired lease, so a
 * heartbeat that lands at the same moment either renews first (and nothing is lost) or
 * finds the attempt lost (and its host stops): never both.
 */
export async function reclaimExpiredLeases(storage: Storage, now: Date): Promise<{ jobId: string; attempt: number }[]> {
  const nowText = formatTimestamp(now);
  const expired = await storage.db
    .selectFrom("attempts")
    .select(["job_id", "number", "host_id"])
    .where("state", "=", "running")
    .where("lease_expires_at", "<", nowText)
    .execute();
  const reclaimed: { jobId: string; attempt: number }[] = [];
  for (const attempt of expired) {
    await storage.transaction(async (trx) => {
      const lost = await trx
        .updateTable("attempts")
        .set({ state: "lost", finished_at: nowText, outcome: "lost" })
        .where("job_id", "=", attempt.job_id)
        .where("number", "=", attempt.number)
        .where("state", "=", "running")
        .where("lease_expires_at", "<", nowText)
        .executeTakeFirst();
      if (lost.numUpdatedRows === 0n) return;
      const { job } = await answerLostAttempt(trx, {
        jobId: attempt.job_id,
        attempt: attempt.number,
        rowLocks: storage.capabilities.rowLocks,
        now,
        reason: `attempt ${attempt.number} lost: host ${attempt.host_id} stopped renewing its lease`,
        lossDetail: `attempt ${attempt.number} lost with host ${attempt.host_id}`,
        queueAnnotation: `attempt ${attempt.number} lost with host ${attempt.host_id}; retrying`,
      });
      reclaimed.push({ jobId: job.id, attempt: attempt.number });
    });
  }
  return reclaimed;
}
