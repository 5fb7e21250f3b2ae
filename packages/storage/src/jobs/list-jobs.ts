import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";
import type { JobRow } from "./insert-job.js";

export interface JobFilters {
  readonly repository?: string;
  readonly branch?: string;
  readonly status?: string;
  readonly class?: string;
}

/**
 * The columns a job listing reads: what the Job document is made of. Not the invocation (up to
 * a megabyte of arguments and environment), nor the admission, usage or settlement text a Job
 * document does not carry. The source manifest is not in the row at all (job_manifests,
 * migration 0042): on SQLite reading any column past it walked its megabytes.
 */
export const JOB_LIST_COLUMNS = [
  "id",
  "tenant_id",
  "submitted_by",
  "description",
  "repository",
  "branch",
  "base_commit",
  "head_sha",
  "size",
  "class",
  "status",
  "accepted_at",
  "queued_at",
  "started_at",
  "finished_at",
  "failure",
  "queue_annotation",
  "retry_of",
] as const satisfies readonly (keyof JobRow)[];

/** A job as a listing reads it. */
export type JobListRow = Pick<JobRow, (typeof JOB_LIST_COLUMNS)[number]>;

/**
 * A page of the tenant's jobs, newest first (keyset on accepted_at, id), with the tenant's total
 * before filtering and its jobs by status (jobs.list's JobsPage: `total` counts the tenant's jobs
 * before filtering, and `summary` is the tenant's as well, whatever the filters).
 *
 * Neither is counted here: `job_status_counts` holds the tenant's jobs by status, kept by
 * triggers on jobs in the transaction of every insert, status change and delete (migration
 * 0037, which explains its locking), so a page reads its rows and at most one counter row per
 * status, whatever the tenant's size. The two reads take no lock and wait for no writer; on
 * PostgreSQL each sees what had committed when it ran (a move committing between them can show
 * in one and not yet in the other, as it could when both were counts).
 */
export async function listJobs(
  target: StorageOrTransaction,
  input: { tenantId: string; filters: JobFilters; limit: number; cursor?: string | null },
): Promise<KeysetPage<JobListRow> & { total: number; summary: Record<string, number> }> {
  const db = executorOf(target);
  let query = db.selectFrom("jobs").select(JOB_LIST_COLUMNS).where("tenant_id", "=", input.tenantId);
  const f = input.filters;
  if (f.repository !== undefined) query = query.where("repository", "=", f.repository);
  if (f.branch !== undefined) query = query.where("branch", "=", f.branch);
  if (f.status !== undefined) query = query.where("status", "=", f.status);
  if (f.class !== undefined) query = query.where("class", "=", f.class);
  // The page and the counts at once: one round trip of the database, not two.
  const [page, counts] = await Promise.all([
    fetchKeysetPage(query, {
      sort: [
        ["accepted_at", "desc", "text"],
        ["id", "desc", "text"],
      ],
      limit: input.limit,
      cursor: input.cursor,
    }),
    db.selectFrom("job_status_counts").select(["status", "jobs"]).where("tenant_id", "=", input.tenantId).execute(),
  ]);
  const summary: Record<string, number> = {};
  let total = 0;
  for (const row of counts) {
    const n = Number(row.jobs);
    if (n === 0) continue;
    summary[row.status] = n;
    total += n;
  }
  return { ...page, total, summary };
}
