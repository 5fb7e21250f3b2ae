import { executorOf, type StorageOrTransaction } from "../executor.js";
import { decodeCursor, fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";

/** One settled attempt with what metering reads of its job. */
export interface MeteredAttemptRow {
  readonly job_id: string;
  readonly number: number;
  readonly repository: string;
  readonly submitted_by: string;
  readonly size: string;
  readonly vcpus: number;
  readonly state: "running" | "finished" | "lost";
  readonly outcome: string | null;
  readonly started_at: string;
  /** When the attempt finished or its loss was recorded. */
  readonly finished_at: string | null;
  /** The job's status now (terminal once its last attempt settled). */
  readonly job_status: string;
  readonly cancel_requested_at: string | null;
  /** JSON: the job's closed usage record (written by the attempt that finished it), or null. */
  readonly usage: string | null;
  /** JSON JobFailure of the job, or null. */
  readonly failure: string | null;
}

/**
 * A page of a tenant's settled attempts (finished or lost) that started in [from, to) and had
 * settled by `settledBy`, oldest first (keyset on started_at, job, attempt). Running attempts
 * are left out: their metering has not closed. What usage is made of: the finishing attempt's
 * closed usage (`jobs.usage`, written once by finishAttempt), and lost attempts' own times.
 */
export async function listMeteredAttempts(
  target: StorageOrTransaction,
  input: { tenantId: string; from: string; to: string; settledBy: string; limit: number; cursor?: string | null },
): Promise<KeysetPage<MeteredAttemptRow>> {
  const db = executorOf(target);
  const sort = [
    ["started_at", "asc", "text"],
    ["job_id", "asc", "text"],
    ["number", "asc", "integer"],
  ] as const;
  // The page starts at or after the cursor's started_at: a bound PostgreSQL can use as the index
  // condition of attempts_by_started (the keyset's OR of tuples is only a filter there, so each
  // page would otherwise scan every row before it: quadratic over an export).
  const resumeAt =
    input.cursor === undefined || input.cursor === null || input.cursor === ""
      ? input.from
      : String(
          decodeCursor(
            input.cursor,
            sort.map(([, , kind]) => kind),
          )[0],
        );
  const query = db
    .selectFrom((eb) =>
      eb
        .selectFrom("attempts as a")
        // CROSS JOIN with the join condition in WHERE is the same join on both engines; SQLite
        // also takes it as "attempts first", so without table statistics it still walks
        // attempts_by_started in keyset order and stops after `limit` rows, instead of starting
        // from the tenant's jobs and sorting all their attempts for every page.
        .crossJoin("jobs as j")
        .whereRef("j.id", "=", "a.job_id")
        .select([
          "a.job_id as job_id",
          "a.number as number",
          "j.repository as repository",
          "j.submitted_by as submitted_by",
          "j.size as size",
          "a.vcpus as vcpus",
          "a.state as state",
          "a.outcome as outcome",
          "a.started_at as started_at",
          "a.finished_at as finished_at",
          "j.status as job_status",
          "j.cancel_requested_at as cancel_requested_at",
          "j.usage as usage",
          "j.failure as failure",
        ])
        .where("j.tenant_id", "=", input.tenantId)
        // Settled (finished or lost): finished_at is set exactly when an attempt leaves running,
        // so this bound also leaves running attempts out — without a state predicate, which
        // would steer SQLite to the attempts_running index.
        .where("a.started_at", ">=", input.from)
        .where("a.started_at", ">=", resumeAt)
        .where("a.started_at", "<", input.to)
        .where("a.finished_at", "<=", input.settledBy)
        .as("m"),
    )
    .selectAll();
  return fetchKeysetPage(query, {
    sort,
    limit: input.limit,
    cursor: input.cursor ?? null,
  });
}
