import { executorOf, type StorageOrTransaction } from "../executor.js";

/** One finished attempt as the anomaly rules measure it. */
export interface FinishedAttemptMeasurement {
  readonly tenantId: string;
  readonly jobId: string;
  readonly attempt: number;
  readonly hostId: string;
  readonly vcpus: number;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly outcome: string | null;
  /** JSON: the host's report (unit with cgroup CPU seconds, crates, tests). */
  readonly report: string | null;
  /** Bytes of cargo's retained JSON output; null when none was retained. */
  readonly cargoOutputBytes: number | null;
}

/**
 * Attempts that finished at or after `since` (attempts_by_finished_at serves the range), newest
 * first, at most `limit`: the rules' window over real measurements. Newest first, so that on a
 * platform finishing more than `limit` attempts in the window a pass still sees every attempt
 * finished since the previous pass (flags are raised once, so the overlap costs nothing).
 */
export async function listFinishedAttemptMeasurements(
  target: StorageOrTransaction,
  input: { since: string; limit: number },
): Promise<FinishedAttemptMeasurement[]> {
  const rows = await executorOf(target)
    .selectFrom("attempts as a")
    .innerJoin("jobs as j", "j.id", "a.job_id")
    .select([
      "j.tenant_id as tenant_id",
      "a.job_id as job_id",
      "a.number as number",
      "a.host_id as host_id",
      "a.vcpus as vcpus",
      "a.started_at as started_at",
      "a.finished_at as finished_at",
      "a.outcome as outcome",
      "a.report as report",
      "a.cargo_output_bytes as cargo_output_bytes",
    ])
    .where("a.finished_at", ">=", input.since)
    .where("a.state", "=", "finished")
    .orderBy("a.finished_at", "desc")
    .limit(input.limit)
    .execute();
  return rows.map((r) => ({
    tenantId: r.tenant_id,
    jobId: r.job_id,
    attempt: Number(r.number),
    hostId: r.host_id,
    vcpus: Number(r.vcpus),
    startedAt: r.started_at,
    finishedAt: r.finished_at ?? r.started_at,
    outcome: r.outcome,
    report: r.report,
    cargoOutputBytes: r.cargo_output_bytes === null ? null : Number(r.cargo_output_bytes),
  }));
}
