import type { Kysely, Updateable } from "kysely";
import { JOB_CHANNELS, notifyAtCommit, tenantPlacementSubject } from "../notifications/job-notices.js";
import type { Database, JobsTable } from "../schema.js";
import { SLOT_HOLDING_STATUSES } from "../tenant-policy/read-tenant-consumption.js";
import { formatTimestamp } from "../timestamps.js";
import { recordTransition } from "./record-transition.js";

/** The job as the settling transaction read it. */
interface SettledJob {
  readonly id: string;
  readonly tenant_id: string;
  readonly repository: string;
  readonly status: string;
}

/**
 * Moves a job to its terminal status and settles it, with its transition, in the caller's
 * transaction: the one place a job ends, whether its attempt finished, its lease was lost for
 * the last time, or it was cancelled before placement. The UPDATE is conditional on the status
 * the caller read, so two settlements racing never both apply: the second gets false and
 * changes nothing.
 */
export async function settleJob(
  trx: Kysely<Database>,
  input: {
    readonly job: SettledJob;
    readonly to: "passed" | "failed" | "cancelled";
    readonly at: Date;
    /** null only for a passed job. */
    readonly failure: { readonly phase: string; readonly cause: string; readonly detail: string } | null;
    /** Attempts the settlement accounts. */
    readonly attempts: number;
    /** The closed usage record, or null when no usage was recorded. */
    readonly usage: Readonly<Record<string, unknown>> | null;
    readonly reason: string;
    /** Further members written in the same UPDATE (a cancellation's requester). */
    readonly also?: Updateable<JobsTable>;
  },
): Promise<boolean> {
  const at = formatTimestamp(input.at);
  const moved = await trx
    .updateTable("jobs")
    .set({
      ...input.also,
      status: input.to,
      finished_at: at,
      failure: input.failure === null ? null : JSON.stringify(input.failure),
      ...(input.usage === null ? {} : { usage: JSON.stringify(input.usage) }),
      settlement: JSON.stringify({
        settled_at: at,
        status: input.to,
        attempts: input.attempts,
        usage_recorded: input.usage !== null,
      }),
    })
    .where("id", "=", input.job.id)
    .where("status", "=", input.job.status)
    .executeTakeFirst();
  if (moved.numUpdatedRows === 0n) return false;
  await recordTransition(trx, {
    jobId: input.job.id,
    tenantId: input.job.tenant_id,
    repository: input.job.repository,
    from: input.job.status,
    to: input.to,
    at: input.at,
    reason: input.reason,
  });
  if ((SLOT_HOLDING_STATUSES as readonly string[]).includes(input.job.status)) {
    await announceFreedSlot(trx, input.job.tenant_id);
  }
  return true;
}

/**
 * A job that held one of its tenant's running slots settled: when the tenant has a concurrency
 * limit and queued jobs (the only case where a freed slot can make one placeable), hosts
 * waiting to claim are told at this commit. Other settlements notify nothing, so an idle fleet
 * is not woken by every job's end.
 */
async function announceFreedSlot(trx: Kysely<Database>, tenantId: string): Promise<void> {
  const waiting = await trx
    .selectFrom("tenant_controls as c")
    .select("c.tenant_id")
    .where("c.tenant_id", "=", tenantId)
    .where("c.max_running_jobs", "is not", null)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom("jobs as q")
          .select("q.id")
          .whereRef("q.tenant_id", "=", "c.tenant_id")
          .where("q.status", "=", "queued"),
      ),
    )
    .executeTakeFirst();
  if (waiting !== undefined) await notifyAtCommit(trx, JOB_CHANNELS.placement, tenantPlacementSubject(tenantId));
}
