import type { Selectable } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { ArtifactsTable, JobTransitionsTable } from "../schema.js";
import type { AttemptRow } from "./claim-next-job.js";
import type { JobRow } from "./insert-job.js";
import { JOB_LIST_COLUMNS, type JobListRow } from "./list-jobs.js";

export interface JobRecord {
  readonly job: JobRow;
  readonly transitions: Selectable<JobTransitionsTable>[];
  readonly attempts: AttemptRow[];
  readonly artifacts: Selectable<ArtifactsTable>[];
}

/** A tenant's job with everything its views are made of; undefined for another tenant's. */
export async function readJob(
  target: StorageOrTransaction,
  input: { tenantId: string; jobId: string },
): Promise<JobRecord | undefined> {
  const db = executorOf(target);
  const job = await db
    .selectFrom("jobs")
    .selectAll()
    .where("id", "=", input.jobId)
    .where("tenant_id", "=", input.tenantId)
    .executeTakeFirst();
  if (job === undefined) return undefined;
  const [transitions, attempts, artifacts] = await Promise.all([
    db.selectFrom("job_transitions").selectAll().where("job_id", "=", job.id).orderBy("position").execute(),
    db.selectFrom("attempts").selectAll().where("job_id", "=", job.id).orderBy("number").execute(),
    db.selectFrom("artifacts").selectAll().where("job_id", "=", job.id).orderBy("attempt").orderBy("idx").execute(),
  ]);
  return { job, transitions, attempts, artifacts };
}

/** A listed job with what its Job document is made of (no artifacts: a Job does not carry them). */
export interface JobListRecord<J extends Pick<JobRow, "id"> = JobRow> {
  readonly job: J;
  readonly transitions: Selectable<JobTransitionsTable>[];
  readonly attempts: AttemptRow[];
}

/**
 * The records of a page of jobs in two queries (transitions and attempts for all of them),
 * rather than two per job: jobs.list pages up to 1000 jobs.
 */
export async function readJobRecords<J extends Pick<JobRow, "id">>(
  target: StorageOrTransaction,
  jobs: readonly J[],
): Promise<JobListRecord<J>[]> {
  if (jobs.length === 0) return [];
  const db = executorOf(target);
  const ids = jobs.map((j) => j.id);
  const [transitions, attempts] = await Promise.all([
    db.selectFrom("job_transitions").selectAll().where("job_id", "in", ids).orderBy("position").execute(),
    db.selectFrom("attempts").selectAll().where("job_id", "in", ids).orderBy("number").execute(),
  ]);
  const of = <T extends { job_id: string }>(rows: T[], id: string) => rows.filter((r) => r.job_id === id);
  return jobs.map((job) => ({
    job,
    transitions: of(transitions, job.id),
    attempts: of(attempts, job.id),
  }));
}

/**
 * A tenant's job as its Job document shows it (jobs.get): the listed columns, its transitions
 * and its attempts; undefined for another tenant's. Not `readJob`: that reads every column (the
 * invocation, admission, usage and settlement text) and the artifacts, none of which the document
 * shows. Neither reads the source manifest: it is not in the job's row (job_manifests, 0042).
 *
 * The job first, then its transitions and attempts (readJobRecords): reading all three at once,
 * the two by a join on the job's tenant, saved a round trip but cost a quarter of jobs.get's
 * throughput on PostgreSQL (docs/benchmarks.md, 2026-11-28).
 */
export async function readJobDocument(
  target: StorageOrTransaction,
  input: { tenantId: string; jobId: string },
): Promise<JobListRecord<JobListRow> | undefined> {
  const db = executorOf(target);
  const job = await db
    .selectFrom("jobs")
    .select(JOB_LIST_COLUMNS)
    .where("id", "=", input.jobId)
    .where("tenant_id", "=", input.tenantId)
    .executeTakeFirst();
  if (job === undefined) return undefined;
  const [record] = await readJobRecords(db, [job]);
  return record;
}
