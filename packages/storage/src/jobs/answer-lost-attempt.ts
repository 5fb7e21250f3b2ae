import type { Kysely, Selectable } from "kysely";
import type { Database, JobsTable } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import { recordTransition } from "./record-transition.js";
import { settleJob } from "./settle-job.js";

/**
 * A job whose running attempt was just recorded `lost` (its host stopped renewing the lease:
 * the lease reaper, or an operator's reconciliation): back to the queue for a new attempt, or,
 * once its cancellation was requested or it used max_attempts, settled `cancelled` / `failed`
 * with cause infrastructure and no usage. The job row is locked where rows lock (as in
 * finishAttempt), so the status read is the one settled. Runs in the caller's transaction,
 * the one that recorded the attempt lost.
 */
export async function answerLostAttempt(
  trx: Kysely<Database>,
  input: {
    jobId: string;
    attempt: number;
    rowLocks: boolean;
    now: Date;
    /** The transition's reason. */
    reason: string;
    /** How the failure names the loss when the job settles. */
    lossDetail: string;
    /** The queue annotation when the job goes back to the queue. */
    queueAnnotation: string;
  },
): Promise<{ job: Selectable<JobsTable>; to: "queued" | "cancelled" | "failed" }> {
  let jobQuery = trx.selectFrom("jobs").selectAll().where("id", "=", input.jobId);
  if (input.rowLocks) jobQuery = jobQuery.forUpdate();
  const job = await jobQuery.executeTakeFirstOrThrow();
  const cancelled = job.status === "cancellation_requested";
  const exhausted = job.attempts_started >= job.max_attempts;
  const to = cancelled ? "cancelled" : exhausted ? "failed" : "queued";
  if (to === "queued") {
    await trx
      .updateTable("jobs")
      .set({ status: "queued", queued_at: formatTimestamp(input.now), queue_annotation: input.queueAnnotation })
      .where("id", "=", job.id)
      .execute();
    await recordTransition(trx, {
      jobId: job.id,
      tenantId: job.tenant_id,
      repository: job.repository,
      from: job.status,
      to,
      at: input.now,
      reason: input.reason,
    });
  } else {
    await settleJob(trx, {
      job,
      to,
      at: input.now,
      failure: { phase: "provision", cause: cancelled ? "cancelled" : "infrastructure", detail: input.lossDetail },
      attempts: job.attempts_started,
      usage: null,
      reason: input.reason,
    });
  }
  return { job, to };
}
