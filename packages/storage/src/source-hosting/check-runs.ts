import { executorOf, type StorageOrTransaction } from "../executor.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";

export type CheckRunStage = "none" | "queued" | "in_progress" | "completed" | "abandoned";

/** A job whose `kiln` check run may be behind its status. */
export interface DueCheckRun {
  readonly jobId: string;
  readonly tenantId: string;
  readonly repository: string;
  readonly headSha: string;
  /** The job's status now. */
  readonly status: string;
  readonly checkRunId: number | null;
  readonly reportedStage: CheckRunStage;
  readonly failures: number;
}

/**
 * Jobs submitted with a head commit (accepted since `since`) whose check run is not completed
 * nor abandoned and not waiting out a backoff or another process's lease: what the check run
 * reporter looks at. A row is made for each by its first lease; until then the stage is `none`.
 */
export async function listDueCheckRuns(
  target: StorageOrTransaction,
  input: { now: Date; since: Date; limit: number },
): Promise<DueCheckRun[]> {
  const now = formatTimestamp(input.now);
  const rows = await executorOf(target)
    .selectFrom("jobs as j")
    .leftJoin("check_runs as c", "c.job_id", "j.id")
    .select([
      "j.id",
      "j.tenant_id",
      "j.repository",
      "j.head_sha",
      "j.status",
      "c.check_run_id",
      "c.reported_stage",
      "c.failures",
    ])
    .where("j.head_sha", "is not", null)
    .where("j.accepted_at", ">=", formatTimestamp(input.since))
    .where((eb) =>
      eb.or([
        eb("c.job_id", "is", null),
        eb.and([
          eb("c.reported_stage", "not in", ["completed", "abandoned"]),
          eb.or([eb("c.next_attempt_at", "is", null), eb("c.next_attempt_at", "<=", now)]),
          eb.or([eb("c.lease_until", "is", null), eb("c.lease_until", "<=", now)]),
        ]),
      ]),
    )
    .orderBy("j.accepted_at")
    .orderBy("j.id")
    .limit(input.limit)
    .execute();
  return rows.map((r) => ({
    jobId: r.id,
    tenantId: r.tenant_id,
    repository: r.repository,
    headSha: r.head_sha ?? "",
    status: r.status,
    checkRunId: r.check_run_id === null ? null : Number(r.check_run_id),
    reportedStage: (r.reported_stage ?? "none") as CheckRunStage,
    failures: r.failures ?? 0,
  }));
}

/**
 * Takes the job's check run for `leaseSeconds` (making its row on first use): true when this
 * caller holds it, false while another process does. The holder reports, then records.
 */
export async function leaseCheckRun(
  target: StorageOrTransaction,
  input: { jobId: string; leaseSeconds: number },
  now: Date,
): Promise<boolean> {
  const db = executorOf(target);
  const until = formatTimestamp(addSeconds(now, input.leaseSeconds));
  const inserted = await db
    .insertInto("check_runs")
    .values({
      job_id: input.jobId,
      check_run_id: null,
      reported_stage: "none",
      failures: 0,
      last_error: null,
      next_attempt_at: null,
      lease_until: until,
      updated_at: formatTimestamp(now),
    })
    .onConflict((c) => c.column("job_id").doNothing())
    .executeTakeFirst();
  if (inserted.numInsertedOrUpdatedRows === 1n) return true;
  const updated = await db
    .updateTable("check_runs")
    .set({ lease_until: until })
    .where("job_id", "=", input.jobId)
    .where((eb) => eb.or([eb("lease_until", "is", null), eb("lease_until", "<=", formatTimestamp(now))]))
    .executeTakeFirst();
  return updated.numUpdatedRows === 1n;
}

/** Records what was reported (the check run's id once created) and releases the lease. */
export async function recordCheckRunReported(
  target: StorageOrTransaction,
  input: { jobId: string; stage: CheckRunStage; checkRunId: number | null },
  now: Date,
): Promise<void> {
  await executorOf(target)
    .updateTable("check_runs")
    .set({
      reported_stage: input.stage,
      check_run_id: input.checkRunId === null ? null : String(input.checkRunId),
      failures: 0,
      last_error: null,
      next_attempt_at: null,
      lease_until: null,
      updated_at: formatTimestamp(now),
    })
    .where("job_id", "=", input.jobId)
    .execute();
}

/**
 * Records a failed report: the error (never a secret), when to try again, and releases the
 * lease; `abandon` gives the check run up (the provider refused it for good).
 */
export async function recordCheckRunFailure(
  target: StorageOrTransaction,
  input: { jobId: string; error: string; retryAt: Date | null; abandon: boolean; checkRunId: number | null },
  now: Date,
): Promise<void> {
  await executorOf(target)
    .updateTable("check_runs")
    .set((eb) => ({
      failures: eb("failures", "+", 1),
      last_error: input.error.slice(0, 2000),
      next_attempt_at: input.retryAt === null ? null : formatTimestamp(input.retryAt),
      lease_until: null,
      updated_at: formatTimestamp(now),
      ...(input.checkRunId === null ? {} : { check_run_id: String(input.checkRunId) }),
      ...(input.abandon ? { reported_stage: "abandoned" } : {}),
    }))
    .where("job_id", "=", input.jobId)
    .execute();
}

/** The job's check run state, for tests and the dashboard. */
export async function readCheckRun(
  target: StorageOrTransaction,
  input: { jobId: string },
): Promise<
  { checkRunId: number | null; reportedStage: CheckRunStage; failures: number; lastError: string | null } | undefined
> {
  const row = await executorOf(target)
    .selectFrom("check_runs")
    .selectAll()
    .where("job_id", "=", input.jobId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    checkRunId: row.check_run_id === null ? null : Number(row.check_run_id),
    reportedStage: row.reported_stage as CheckRunStage,
    failures: row.failures,
    lastError: row.last_error,
  };
}
