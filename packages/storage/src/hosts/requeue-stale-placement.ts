import type { Kysely } from "kysely";
import type { Storage } from "../dialect.js";
import { answerLostAttempt } from "../jobs/answer-lost-attempt.js";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import { type HostReceiptEntry, recordHostReceipt } from "./record-host-receipt.js";

export type StalePlacementRequeue =
  | { kind: "requeued" | "failed" | "cancelled"; entries: HostReceiptEntry[] }
  | { kind: "not_found" }
  | { kind: "conflict"; detail: string };

/**
 * An operator's reconciliation of a placement whose host stopped renewing its lease: the attempt
 * is recorded `lost` and its job goes back to the queue (or fails, or settles cancelled), as the
 * lease reaper does once the lease expires — but fenced on the lease the operator read: the
 * attempt UPDATE is conditional on `state = 'running' AND lease_expires_at = expected`, so a
 * heartbeat that renewed it since (the host is alive after all) makes it a conflict, and the
 * host's next heartbeat after the change is answered `stale`. One transaction with the reap
 * receipt (and the caller's audit entry, through `alsoInTransaction`).
 */
export async function requeueStalePlacement(
  storage: Storage,
  input: {
    jobId: string;
    attempt: number;
    expectedLeaseExpiresAt: string;
    actor: string;
    reason: string;
    receipt: { id: string; vmId: string; summary: string };
    now: Date;
    alsoInTransaction: (trx: Kysely<Database>, outcome: string) => Promise<void>;
  },
): Promise<StalePlacementRequeue> {
  const nowText = formatTimestamp(input.now);
  return storage.transaction(async (trx) => {
    const attempt = await trx
      .selectFrom("attempts")
      .select(["host_id", "state", "lease_expires_at"])
      .where("job_id", "=", input.jobId)
      .where("number", "=", input.attempt)
      .executeTakeFirst();
    if (attempt === undefined) return { kind: "not_found" } as const;
    const lost = await trx
      .updateTable("attempts")
      .set({ state: "lost", finished_at: nowText, outcome: "lost" })
      .where("job_id", "=", input.jobId)
      .where("number", "=", input.attempt)
      .where("state", "=", "running")
      .where("lease_expires_at", "=", input.expectedLeaseExpiresAt)
      .executeTakeFirst();
    if (lost.numUpdatedRows === 0n) {
      const detail =
        attempt.state !== "running"
          ? `attempt ${input.attempt} of job ${input.jobId} is ${attempt.state} now; nothing to requeue`
          : `the lease of attempt ${input.attempt} of job ${input.jobId} moved to ${attempt.lease_expires_at} since it was read (${input.expectedLeaseExpiresAt}): its host renewed it; re-read the placements`;
      await input.alsoInTransaction(trx, "conflict");
      return { kind: "conflict", detail } as const;
    }
    const entries: HostReceiptEntry[] = [
      {
        kind: "attempt_lost",
        detail: `attempt ${input.attempt} recorded lost on host ${attempt.host_id}; its next heartbeat is answered stale`,
        at: nowText,
      },
    ];
    const { job, to } = await answerLostAttempt(trx, {
      jobId: input.jobId,
      attempt: input.attempt,
      rowLocks: storage.capabilities.rowLocks,
      now: input.now,
      reason: `attempt ${input.attempt} reconciled by ${input.actor}: ${input.reason}`,
      lossDetail: `attempt ${input.attempt} lost with host ${attempt.host_id} (reconciled by an operator)`,
      queueAnnotation: `attempt ${input.attempt} on host ${attempt.host_id} reconciled as stale; retrying`,
    });
    if (to === "queued") {
      entries.push({ kind: "job_requeued", detail: `job ${job.id} queued for a new attempt`, at: nowText });
    } else {
      entries.push({
        kind: to === "cancelled" ? "job_cancelled" : "job_failed",
        detail:
          to === "cancelled"
            ? `job ${job.id} settled cancelled: its cancellation was requested`
            : `job ${job.id} failed: it used all ${job.max_attempts} attempts`,
        at: nowText,
      });
    }
    entries.push({ kind: "metering_closed", detail: "no usage is recorded for a lost attempt", at: nowText });
    await recordHostReceipt(trx, {
      id: input.receipt.id,
      hostId: attempt.host_id,
      kind: "reap",
      placement: { jobId: input.jobId, vmId: input.receipt.vmId },
      actor: input.actor,
      at: input.now,
      summary: input.receipt.summary,
      entries,
    });
    const kind = to === "queued" ? "requeued" : to;
    await input.alsoInTransaction(trx, kind);
    return { kind, entries };
  });
}
