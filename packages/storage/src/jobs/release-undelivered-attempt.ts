import type { Storage } from "../dialect.js";
import { refreshTenantQueueAnnotation } from "../tenant-policy/annotate-tenant-queue.js";
import { recordTransition } from "./record-transition.js";
import { settleJob } from "./settle-job.js";

export type UndeliveredRelease = "released" | "cancelled" | "stale";

/**
 * Undoes a claim whose answer never reached its host (the host's claim ended — it disconnected —
 * before the placement could be written to it): the host never saw the lease token, so nothing
 * ran and nothing can report under it. The attempt row is removed and the job goes back to the
 * queue as it was — its attempt count, first start and place in the queue (`queued_at`)
 * unchanged by the claim that did not reach anyone — with a transition saying why, which also
 * issues the `queued` notice that wakes hosts waiting to claim. A cancellation requested in the
 * meantime settles the job `cancelled` instead (no attempt ran, no usage).
 *
 * Fenced like every report on an attempt: the DELETE is conditional on the attempt still
 * running under `leaseToken`, so a release can never undo a later attempt or one the reaper has
 * already recorded lost (`stale`). The job row is locked first where rows lock (as the reaper
 * and finishAttempt do, in the same job → attempt order), so the status read is the one moved.
 */
export async function releaseUndeliveredAttempt(
  storage: Storage,
  input: { jobId: string; attempt: number; leaseToken: string; now: Date; reason: string },
): Promise<UndeliveredRelease> {
  return storage.transaction(async (trx) => {
    let jobQuery = trx.selectFrom("jobs").selectAll().where("id", "=", input.jobId);
    if (storage.capabilities.rowLocks) jobQuery = jobQuery.forUpdate();
    const job = await jobQuery.executeTakeFirst();
    if (job === undefined || job.attempts_started !== input.attempt) return "stale";
    const removed = await trx
      .deleteFrom("attempts")
      .where("job_id", "=", input.jobId)
      .where("number", "=", input.attempt)
      .where("lease_token", "=", input.leaseToken)
      .where("state", "=", "running")
      .executeTakeFirst();
    if (removed.numDeletedRows === 0n) return "stale";
    const attemptsBefore = input.attempt - 1;
    if (job.status === "cancellation_requested") {
      await settleJob(trx, {
        job,
        to: "cancelled",
        at: input.now,
        failure: { phase: "provision", cause: "cancelled", detail: input.reason },
        attempts: attemptsBefore,
        usage: null,
        reason: input.reason,
        also: { attempts_started: attemptsBefore, ...(attemptsBefore === 0 ? { started_at: null } : {}) },
      });
      return "cancelled";
    }
    await trx
      .updateTable("jobs")
      .set({
        status: "queued",
        attempts_started: attemptsBefore,
        // The first start was this claim's own: the job has not started after all.
        ...(attemptsBefore === 0 ? { started_at: null } : {}),
      })
      .where("id", "=", job.id)
      .where("status", "=", "running")
      .execute();
    await recordTransition(trx, {
      jobId: job.id,
      tenantId: job.tenant_id,
      repository: job.repository,
      from: job.status,
      to: "queued",
      at: input.now,
      reason: input.reason,
    });
    // The tenant's slot this placement took is free again.
    await refreshTenantQueueAnnotation(trx, { tenantId: job.tenant_id, skipLocked: storage.capabilities.skipLocked });
    return "released";
  });
}
