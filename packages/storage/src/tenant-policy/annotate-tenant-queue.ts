import { executorOf, type StorageOrTransaction } from "../executor.js";
import { SLOT_HOLDING_STATUSES } from "./read-tenant-consumption.js";

/** Every annotation this module writes starts so; others (a lost attempt's retry) are left alone. */
export const TENANT_WAIT_PREFIX = "waiting: tenant ";

/**
 * Why the tenant's queued jobs cannot be placed now, or null: suspended by the operator, or
 * its running jobs (running or being cancelled) at its concurrency limit. A tenant without
 * controls is never held (the platform default, PLATFORM_MAX_RUNNING_JOBS, is not counted).
 */
export async function tenantQueueBlock(target: StorageOrTransaction, tenantId: string): Promise<string | null> {
  const db = executorOf(target);
  const controls = await db
    .selectFrom("tenant_controls")
    .select(["max_running_jobs", "suspended"])
    .where("tenant_id", "=", tenantId)
    .executeTakeFirst();
  if (controls === undefined) return null;
  if (controls.suspended) {
    return `${TENANT_WAIT_PREFIX}${tenantId} is suspended by the operator; queued jobs are placed once it is lifted`;
  }
  if (controls.max_running_jobs === null) return null;
  const running = await runningSlots(target, tenantId);
  if (running < controls.max_running_jobs) return null;
  return `${TENANT_WAIT_PREFIX}${tenantId} is at its concurrency limit (${running} running of ${controls.max_running_jobs}); placed when one of its jobs ends`;
}

/** The tenant's jobs holding a running slot. */
export async function runningSlots(target: StorageOrTransaction, tenantId: string): Promise<number> {
  const row = await executorOf(target)
    .selectFrom("jobs")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("tenant_id", "=", tenantId)
    .where("status", "in", [...SLOT_HOLDING_STATUSES])
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * Writes `reason` (null clears) as the queue annotation of the tenant's queued jobs whose
 * annotation is absent or one of this module's; an annotation another verb wrote (a lost
 * attempt's retry) stays. Placement clears a job's annotation when it runs.
 *
 * Locking: with `skipLocked` (PostgreSQL) only rows no other transaction holds are written
 * (`FOR UPDATE SKIP LOCKED` in the sub-select), so an annotation never waits on a row lock: a
 * row held elsewhere is a claim's candidate, which that claim places (clearing it) or annotates
 * itself. Waiting there would deadlock a claim that holds its candidate and waits for the
 * tenant's controls row against one that holds the controls row and annotates.
 */
export async function annotateTenantQueue(
  target: StorageOrTransaction,
  input: { tenantId: string; reason: string | null; skipLocked: boolean },
): Promise<void> {
  const reason = input.reason;
  const db = executorOf(target);
  let rows = db
    .selectFrom("jobs as q")
    .select("q.id")
    .where("q.tenant_id", "=", input.tenantId)
    .where("q.status", "=", "queued");
  rows =
    reason === null
      ? rows.where("q.queue_annotation", "like", `${TENANT_WAIT_PREFIX}%`)
      : rows.where((eb) =>
          eb.or([
            eb("q.queue_annotation", "is", null),
            eb.and([
              eb("q.queue_annotation", "like", `${TENANT_WAIT_PREFIX}%`),
              eb("q.queue_annotation", "!=", reason),
            ]),
          ]),
        );
  if (input.skipLocked) rows = rows.forUpdate().skipLocked();
  await db.updateTable("jobs").set({ queue_annotation: reason }).where("id", "in", rows).execute();
}

/** Recomputes and writes the tenant's queue annotation (after a controls change or a placement). */
export async function refreshTenantQueueAnnotation(
  target: StorageOrTransaction,
  input: { tenantId: string; skipLocked: boolean },
): Promise<void> {
  await annotateTenantQueue(target, { ...input, reason: await tenantQueueBlock(target, input.tenantId) });
}
