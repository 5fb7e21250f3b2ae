import type { AttemptReport } from "@kiln/contract";
import type { FinishedAttemptMeasurement } from "@kiln/storage";
import { parseAttemptReport } from "../../jobs/attempt-report.js";
import type { AnomalyFinding, AnomalyRuleDescription } from "./anomaly-rule.js";

/** CPU at or above this share of the attempt's vCPUs for its whole wall clock is pinned. */
export const SATURATION_SHARE = 0.95;
/** Shorter attempts are not judged: a short build legitimately saturates its vCPUs. */
export const MIN_WALL_SECONDS = 60;

export const CPU_SATURATED_WITHOUT_OUTPUT: AnomalyRuleDescription = {
  flag: "cpu_saturated_without_output",
  description: `an attempt of at least ${MIN_WALL_SECONDS} s used at least ${SATURATION_SHARE * 100} % of its vCPUs for its whole wall clock (cgroup CPU seconds ÷ (wall × vCPUs)) and cargo produced nothing: no crate compiled or fresh, no test result, no retained cargo output — a miner's signature`,
};

/** Whether cargo reported anything at all for the attempt. */
function cargoOutputOf(report: AttemptReport, bytes: number | null): string | null {
  if (report.crates.length > 0) return `${report.crates.length} crate(s) reported`;
  if (report.tests.length > 0) return `${report.tests.length} test result(s) reported`;
  if (bytes !== null && bytes > 0) return `${bytes} bytes of cargo output retained`;
  return null;
}

/**
 * A tenant's job pinned at 100 % CPU for its whole wall clock with no cargo output: the cgroup's
 * CPU seconds (the host's measurement, `unit.cpu_seconds`) against the attempt's wall clock
 * (its recorded start and finish) times its vCPUs, and the attempt's report and retained output.
 */
export function cpuSaturatedWithoutOutput(attempt: FinishedAttemptMeasurement): AnomalyFinding | null {
  const report = parseAttemptReport(attempt.report);
  const cpuSeconds = report?.unit?.cpu_seconds ?? null;
  if (report === null || cpuSeconds === null) return null;
  const wallSeconds = (Date.parse(attempt.finishedAt) - Date.parse(attempt.startedAt)) / 1000;
  const vcpus = report.unit?.vcpus ?? attempt.vcpus;
  if (wallSeconds < MIN_WALL_SECONDS || vcpus < 1) return null;
  const share = cpuSeconds / (wallSeconds * vcpus);
  if (share < SATURATION_SHARE || cargoOutputOf(report, attempt.cargoOutputBytes) !== null) return null;
  const reference = `job:${attempt.jobId}#${attempt.attempt}`;
  return {
    rule: CPU_SATURATED_WITHOUT_OUTPUT.flag,
    tenantId: attempt.tenantId,
    subject: reference,
    jobId: attempt.jobId,
    evidence: [
      {
        kind: "cpu_saturation",
        detail: `${cpuSeconds.toFixed(1)} CPU seconds in ${wallSeconds.toFixed(1)} s of wall clock on ${vcpus} vCPU(s): ${(share * 100).toFixed(1)} % of the attempt's vCPUs for its whole run (host ${attempt.hostId}, outcome ${attempt.outcome ?? "none"})`,
        reference,
        observed_at: attempt.finishedAt,
      },
      {
        kind: "no_cargo_output",
        detail: `no crate compiled or fresh, no test result, ${attempt.cargoOutputBytes ?? 0} bytes of cargo output`,
        reference,
        observed_at: attempt.finishedAt,
      },
    ],
  };
}
