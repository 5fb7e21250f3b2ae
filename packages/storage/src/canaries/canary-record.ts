import type { Selectable } from "kysely";
import type { CanariesTable } from "../schema.js";

/** A canary as the platform recorded it, with its job's status once it became one. */
export interface CanaryRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly hostId: string;
  readonly dueAt: string;
  readonly createdAt: string;
  readonly submittedAt: string | null;
  readonly jobId: string | null;
  readonly submissionError: string | null;
  /** The job's status, finish and attempts; null while no job exists. */
  readonly job: { status: string; finishedAt: string | null; attemptsStarted: number } | null;
}

export type CanaryRow = Selectable<CanariesTable>;

export function canaryRecordOf(
  row: CanaryRow,
  job: { status: string | null; finished_at: string | null; attempts_started: number | string | null },
): CanaryRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    hostId: row.host_id,
    dueAt: row.due_at,
    createdAt: row.created_at,
    submittedAt: row.submitted_at,
    jobId: row.job_id,
    submissionError: row.submission_error,
    job:
      job.status === null
        ? null
        : { status: job.status, finishedAt: job.finished_at, attemptsStarted: Number(job.attempts_started ?? 0) },
  };
}
