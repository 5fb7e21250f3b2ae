import type { Storage } from "../dialect.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";

export type LeaseRenewal = { kind: "renewed"; cancelRequested: boolean } | { kind: "stale" };

/**
 * A host's heartbeat for an attempt. Fenced: only the current holder's token on a
 * still-running attempt renews; anything else is stale and the host must stop. The
 * answer also carries whether the job's cancellation was requested.
 */
export async function renewAttemptLease(
  storage: Storage,
  input: { jobId: string; attempt: number; leaseToken: string; leaseSeconds: number; now: Date },
): Promise<LeaseRenewal> {
  return storage.transaction(async (trx) => {
    const renewed = await trx
      .updateTable("attempts")
      .set({ lease_expires_at: formatTimestamp(addSeconds(input.now, input.leaseSeconds)) })
      .where("job_id", "=", input.jobId)
      .where("number", "=", input.attempt)
      .where("lease_token", "=", input.leaseToken)
      .where("state", "=", "running")
      .executeTakeFirst();
    if (renewed.numUpdatedRows === 0n) return { kind: "stale" };
    const job = await trx.selectFrom("jobs").select("status").where("id", "=", input.jobId).executeTakeFirstOrThrow();
    return { kind: "renewed", cancelRequested: job.status === "cancellation_requested" };
  });
}
