import type { CanaryRecord, TrialJobRow } from "@kiln/storage";
import type { CanarySettings } from "../platform/canaries/canary-settings.js";
import { lateAtOf } from "../platform/canaries/canary-verdict.js";
import type { TrialLedger } from "./trial-ledger.js";

/**
 * How a due probe came out: `passed`, `failed` (failed or cancelled within its bound),
 * `unsettled` (still within its bound), or `missed` — reserved, but it never became a job or its
 * job did not finish by its late bound (the same bound the canary verdict judges by).
 */
export type DueProbeOutcome = "passed" | "failed" | "unsettled" | "missed";

/** One probe that was due: a canary the platform reserved, or a probe-tenant job with none. */
export interface DueProbe {
  /** When it was due: the reservation, or the job's acceptance for a job no reservation names. */
  readonly dueAt: string;
  readonly outcome: DueProbeOutcome;
  readonly canary: CanaryRecord | undefined;
  readonly job: TrialJobRow | undefined;
  /** The late bound of a reserved probe; null for a job no reservation names. */
  readonly lateAt: string | null;
}

/**
 * Every probe due by `now`, oldest first. A probe is due when the platform reserves its canary
 * (before submitting it), so one whose job never ran is counted too; a probe-tenant job no
 * reservation names (submitted by hand) is due at its acceptance and judged by its status.
 */
export function dueProbesOf(
  ledger: TrialLedger,
  reservations: readonly CanaryRecord[],
  settings: CanarySettings,
  now: Date,
): DueProbe[] {
  const jobs = new Map(ledger.jobs.filter((j) => j.tenant_id === ledger.tenants.probe).map((j) => [j.id, j]));
  const probes: DueProbe[] = [];
  const reservedJobs = new Set<string>();
  for (const canary of reservations) {
    const job = canary.jobId === null ? undefined : jobs.get(canary.jobId);
    if (canary.jobId !== null) reservedJobs.add(canary.jobId);
    const lateAt = lateAtOf(canary, settings);
    probes.push({
      dueAt: canary.createdAt,
      outcome: reservedOutcome(job, lateAt, now),
      canary,
      job,
      lateAt: lateAt.toISOString(),
    });
  }
  for (const job of jobs.values()) {
    if (reservedJobs.has(job.id)) continue;
    probes.push({ dueAt: job.accepted_at, outcome: statusOutcome(job.status), canary: undefined, job, lateAt: null });
  }
  return probes.sort((a, b) => Date.parse(a.dueAt) - Date.parse(b.dueAt));
}

function reservedOutcome(job: TrialJobRow | undefined, lateAt: Date, now: Date): DueProbeOutcome {
  const finishedAt = job?.finished_at ?? null;
  if (job !== undefined && finishedAt !== null && Date.parse(finishedAt) < lateAt.getTime()) {
    return statusOutcome(job.status);
  }
  // No job, an unfinished one, or one that finished only after its bound.
  return now.getTime() >= lateAt.getTime() ? "missed" : "unsettled";
}

function statusOutcome(status: string): DueProbeOutcome {
  if (status === "passed") return "passed";
  if (status === "failed" || status === "cancelled") return "failed";
  return "unsettled";
}
