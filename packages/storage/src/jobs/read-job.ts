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
 * and its attempts; undefined for another tenant's. Not `readJob`: that reads every column, the
 * source manifest's megabytes among them, and the artifacts, none of which the document shows.
 *
 * The three reads run at once, each bound to the tenant (the transitions and attempts through
 * their job's row), so the answer costs one round trip after the caller's authentication, not
 * two: on a machine of few cores each round trip waits for a database backend to be scheduled.
 */
export async function readJobDocument(
  target: StorageOrTransaction,
  input: { tenantId: string; jobId: string },
): Promise<JobListRecord<JobListRow> | undefined> {
  const db = executorOf(target);
  const [job, transitions, attempts] = await Promise.all([
    db
      .selectFrom("jobs")
      .select(JOB_LIST_COLUMNS)
      .where("id", "=", input.jobId)
      .where("tenant_id", "=", input.tenantId)
      .executeTakeFirst(),
    db
      .selectFrom("job_transitions")
      .innerJoin("jobs", "jobs.id", "job_transitions.job_id")
      .selectAll("job_transitions")
      .where("job_transitions.job_id", "=", input.jobId)
      .where("jobs.tenant_id", "=", input.tenantId)
      .orderBy("job_transitions.position")
      .execute(),
    db
      .selectFrom("attempts")
      .innerJoin("jobs", "jobs.id", "attempts.job_id")
      .selectAll("attempts")
      .where("attempts.job_id", "=", input.jobId)
      .where("jobs.tenant_id", "=", input.tenantId)
      .orderBy("attempts.number")
      .execute(),
  ]);
  return job === undefined ? undefined : { job, transitions, attempts };
}
