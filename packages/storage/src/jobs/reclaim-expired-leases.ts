import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";
import { recordTransition } from "./record-transition.js";
import { settleJob } from "./settle-job.js";

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
      // Locked where rows lock, as in finishAttempt: the status read is the one settled.
      let jobQuery = trx.selectFrom("jobs").selectAll().where("id", "=", attempt.job_id);
      if (storage.capabilities.rowLocks) jobQuery = jobQuery.forUpdate();
      const job = await jobQuery.executeTakeFirstOrThrow();
      const cancelled = job.status === "cancellation_requested";
      const exhausted = job.attempts_started >= job.max_attempts;
      const to = cancelled ? "cancelled" : exhausted ? "failed" : "queued";
      const reason = `attempt ${attempt.number} lost: host ${attempt.host_id} stopped renewing its lease`;
      if (to === "queued") {
        await trx
          .updateTable("jobs")
          .set({
            status: "queued",
            queued_at: nowText,
            queue_annotation: `attempt ${attempt.number} lost with host ${attempt.host_id}; retrying`,
          })
          .where("id", "=", job.id)
          .execute();
        await recordTransition(trx, {
          jobId: job.id,
          tenantId: job.tenant_id,
          repository: job.repository,
          from: job.status,
          to,
          at: now,
          reason,
        });
      } else {
        await settleJob(trx, {
          job,
          to,
          at: now,
          failure: {
            phase: "provision",
            cause: cancelled ? "cancelled" : "infrastructure",
            detail: `attempt ${attempt.number} lost with host ${attempt.host_id}`,
          },
          attempts: job.attempts_started,
          usage: null,
          reason,
        });
      }
      reclaimed.push({ jobId: job.id, attempt: attempt.number });
    });
  }
  return reclaimed;
}
