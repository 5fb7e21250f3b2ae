import { inTransaction, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { recordTransition } from "./record-transition.js";
import { settleJob } from "./settle-job.js";

export type CancellationResult =
  | { kind: "requested"; status: "cancellation_requested" | "cancelled" }
  | { kind: "not_found" }
  | { kind: "terminal"; status: string };

/**
 * Cancels a job. A queued job is cancelled at once and settles explicitly with no
 * attempt and no usage record; a running one moves to cancellation_requested and its
 * host reaps it at the next heartbeat (metering closes at this instant). Repeating the
 * request while it is being reaped answers the same. It joins the caller's transaction
 * (the keyed mutation's receipt commits with it).
 *
 * The writes are conditional on the status read. When one misses, another transaction moved
 * the job after that read (PostgreSQL, READ COMMITTED: a claim placing the queued job, a
 * reaper requeueing it); the request is then decided again on the status now committed,
 * which the next read sees, rather than refused. SQLite's single writer never misses.
 */
export async function requestCancellation(
  target: StorageOrTransaction,
  input: { tenantId: string; jobId: string; by: string; now: Date },
): Promise<CancellationResult> {
  const now = formatTimestamp(input.now);
  return inTransaction(target, async (trx) => {
    for (;;) {
      const job = await trx
        .selectFrom("jobs")
        .selectAll()
        .where("id", "=", input.jobId)
        .where("tenant_id", "=", input.tenantId)
        .executeTakeFirst();
      if (job === undefined) return { kind: "not_found" };
      if (job.status === "cancellation_requested") return { kind: "requested", status: "cancellation_requested" };
      if (job.status !== "queued" && job.status !== "running") return { kind: "terminal", status: job.status };
      if (job.status === "queued") {
        const settled = await settleJob(trx, {
          job,
          to: "cancelled",
          at: input.now,
          failure: { phase: "queue", cause: "cancelled", detail: `cancelled by ${input.by} before placement` },
          attempts: 0,
          usage: null,
          reason: `cancelled by ${input.by}`,
          also: { cancel_requested_at: now, cancel_requested_by: input.by },
        });
        if (settled) return { kind: "requested", status: "cancelled" };
        continue;
      }
      const to = "cancellation_requested";
      const moved = await trx
        .updateTable("jobs")
        .set({ status: to, cancel_requested_at: now, cancel_requested_by: input.by })
        .where("id", "=", job.id)
        .where("status", "=", job.status)
        .executeTakeFirst();
      if (moved.numUpdatedRows === 0n) continue;
      await recordTransition(trx, {
        jobId: job.id,
        tenantId: job.tenant_id,
        repository: job.repository,
        from: job.status,
        to,
        at: input.now,
        reason: `cancelled by ${input.by}`,
      });
      return { kind: "requested", status: to };
    }
  });
}
