import { TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { executorOf, type StorageOrTransaction } from "../executor.js";

/** A job of a trial tenant as the dogfood trial reads it. */
export interface TrialJobRow {
  readonly id: string;
  readonly tenant_id: string;
  readonly repository: string;
  readonly head_sha: string | null;
  readonly status: string;
  readonly submission_key: string | null;
  readonly retry_of: string | null;
  readonly accepted_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  /** JSON JobFailure or null. */
  readonly failure: string | null;
  /** JSON closed usage record or null. */
  readonly usage: string | null;
  /** JSON settlement summary or null. */
  readonly settlement: string | null;
}

/** An attempt of a trial job. */
export interface TrialAttemptRow {
  readonly job_id: string;
  readonly number: number;
  readonly host_id: string;
  readonly state: string;
  readonly started_at: string;
  readonly finished_at: string | null;
  readonly outcome: string | null;
  readonly exit_code: number | null;
  /** JSON AttemptReport or null. */
  readonly report: string | null;
  readonly cargo_output_sha256: string | null;
}

/** A transition of a trial job into a terminal status: each one is a settlement of the job. */
export interface TrialSettlementRow {
  readonly job_id: string;
  readonly position: number;
  readonly to_status: string;
  readonly at: string;
}

export interface TrialLedger {
  readonly jobs: TrialJobRow[];
  readonly attempts: TrialAttemptRow[];
  readonly settlements: TrialSettlementRow[];
}

/**
 * The job ledger of the trial's tenants (the dogfood tenant and the canary tenant): their jobs,
 * attempts and settlement transitions, oldest first. Read without locks: the trial reads a
 * snapshot, and its audit is idempotent, so a row committed just after is read by the next pass.
 */
export async function listTrialLedger(
  target: StorageOrTransaction,
  input: { tenantIds: readonly string[] },
): Promise<TrialLedger> {
  const db = executorOf(target);
  if (input.tenantIds.length === 0) return { jobs: [], attempts: [], settlements: [] };
  const tenants = [...input.tenantIds];
  const [jobs, attempts, settlements] = await Promise.all([
    db
      .selectFrom("jobs")
      .select([
        "id",
        "tenant_id",
        "repository",
        "head_sha",
        "status",
        "submission_key",
        "retry_of",
        "accepted_at",
        "started_at",
        "finished_at",
        "failure",
        "usage",
        "settlement",
      ])
      .where("tenant_id", "in", tenants)
      .orderBy("accepted_at")
      .orderBy("id")
      .execute(),
    db
      .selectFrom("attempts as a")
      .innerJoin("jobs as j", "j.id", "a.job_id")
      .select([
        "a.job_id as job_id",
        "a.number as number",
        "a.host_id as host_id",
        "a.state as state",
        "a.started_at as started_at",
        "a.finished_at as finished_at",
        "a.outcome as outcome",
        "a.exit_code as exit_code",
        "a.report as report",
        "a.cargo_output_sha256 as cargo_output_sha256",
      ])
      .where("j.tenant_id", "in", tenants)
      .orderBy("a.job_id")
      .orderBy("a.number")
      .execute(),
    db
      .selectFrom("job_transitions as t")
      .innerJoin("jobs as j", "j.id", "t.job_id")
      .select(["t.job_id as job_id", "t.position as position", "t.to_status as to_status", "t.at as at"])
      .where("j.tenant_id", "in", tenants)
      .where("t.to_status", "in", [...TERMINAL_JOB_STATUSES])
      .orderBy("t.job_id")
      .orderBy("t.position")
      .execute(),
  ]);
  return { jobs, attempts, settlements };
}
