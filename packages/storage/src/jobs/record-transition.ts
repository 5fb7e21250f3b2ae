import type { Kysely } from "kysely";
import { JOB_CHANNELS, notifyAtCommit } from "../notifications/job-notices.js";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Appends one status move to the job's transitions and to the tenant's job events
 * (the durable sequence cli.events resumes from). Always called inside the
 * transaction that changed jobs.status, so the three never disagree. The event's
 * sequence is the tenant's own, numbered by the database in commit order (migration 0030).
 * The notices that wake the job's log streams, the tenant's event streams and (for a queued job) waiting hosts are
 * issued in that transaction too, so they are delivered when the move commits and never for
 * one rolled back.
 */
export async function recordTransition(
  trx: Kysely<Database>,
  input: {
    jobId: string;
    tenantId: string;
    repository: string;
    from: string | null;
    to: string;
    at: Date;
    reason: string;
  },
): Promise<void> {
  const at = formatTimestamp(input.at);
  const last = await trx
    .selectFrom("job_transitions")
    .select((eb) => eb.fn.max("position").as("position"))
    .where("job_id", "=", input.jobId)
    .executeTakeFirst();
  await trx
    .insertInto("job_transitions")
    .values({
      job_id: input.jobId,
      position: Number(last?.position ?? 0) + 1,
      from_status: input.from,
      to_status: input.to,
      at,
      reason: input.reason,
    })
    .execute();
  await trx
    .insertInto("job_events")
    .values({
      tenant_id: input.tenantId,
      job_id: input.jobId,
      repository: input.repository,
      status: input.to,
      previous_status: input.from,
      at,
    })
    .execute();
  await notifyAtCommit(trx, JOB_CHANNELS.job, input.jobId);
  await notifyAtCommit(trx, JOB_CHANNELS.jobEvents, input.tenantId);
  if (input.to === "queued") await notifyAtCommit(trx, JOB_CHANNELS.queued, input.jobId);
}
