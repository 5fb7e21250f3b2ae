import type { DogfoodMaintenanceRow, TrialAttemptRow, TrialJobRow } from "@kiln/storage";
import type { DueProbe } from "./due-probes.js";
import type { TrialLedger } from "./trial-ledger.js";

/**
 * What the trial is about, found in kiln's own ledger rather than typed in by an operator:
 *
 * - wrong_green: a job settled `passed` whose settling attempt shows a failure — a non-zero
 *   exit code, a failed test or phase in its report, or cargo output saying a test failed;
 * - duplicate_execution: two attempts of one job that both ran to the end (state `finished`);
 * - duplicate_charge: two settlements of one job — each settlement writes exactly one
 *   transition into a terminal status (storage `settle-job.ts`), so two such rows charged it twice;
 * - outage: a probe (canary job) that failed outside declared maintenance, or a probe reserved
 *   outside it that was missed (never became a job, or its job did not finish by its late
 *   bound) — the platform records the unexpected outage itself (rule 10);
 * - bounded_recovery: a job that lost an attempt with its host and still passed on a later one.
 */
export type LedgerFindingClass =
  | "wrong_green"
  | "duplicate_execution"
  | "duplicate_charge"
  | "outage"
  | "bounded_recovery";

export interface LedgerFinding {
  /** Stable per job and class, so every pass of the audit records a finding exactly once. */
  readonly incidentId: string;
  readonly class: LedgerFindingClass;
  readonly job: string;
  readonly records: readonly string[];
  readonly occurredAt: string;
  readonly serviceBlocking: boolean;
  readonly detail: string;
}

/** Cargo output lines that mean a test or the build failed whatever the job's status says. */
const FAILURE_IN_OUTPUT = /test result: FAILED|error: test failed|error: could not compile|^error(\[E\d+\])?: /m;

/** The attempt whose finish settled the job: its highest-numbered finished attempt. */
export function settlingAttemptOf(ledger: TrialLedger, jobId: string): TrialAttemptRow | undefined {
  const finished = ledger.attemptsOf(jobId).filter((a) => a.state === "finished");
  return finished.at(-1);
}

/** Why a passed job's settling attempt shows a failure, or null when it shows none. */
export function wrongGreenEvidence(attempt: TrialAttemptRow, cargoOutput: string | null): string | null {
  const signs: string[] = [];
  if (attempt.exit_code !== null && attempt.exit_code !== 0) signs.push(`cargo exited ${attempt.exit_code}`);
  const report = parseReport(attempt.report);
  const failedTests = report?.tests?.filter((t) => t.outcome === "failed").map((t) => t.name) ?? [];
  if (failedTests.length > 0) signs.push(`failed tests in the report: ${failedTests.join(", ")}`);
  const failedPhases = report?.phases?.filter((p) => p.status === "failed").map((p) => p.name) ?? [];
  if (failedPhases.length > 0) signs.push(`failed phases in the report: ${failedPhases.join(", ")}`);
  const unitExit = report?.unit?.exit_code;
  if (typeof unitExit === "number" && unitExit !== 0 && unitExit !== attempt.exit_code) {
    signs.push(`the unit reported exit code ${unitExit}`);
  }
  const line = cargoOutput === null ? null : FAILURE_IN_OUTPUT.exec(cargoOutput)?.[0];
  if (line != null) signs.push(`cargo output says "${line.trim()}"`);
  return signs.length === 0 ? null : signs.join("; ");
}

interface ReportShape {
  tests?: { name: string; outcome: string }[];
  phases?: { name: string; status: string }[];
  unit?: { exit_code?: number | null } | null;
}

export function parseReport(report: string | null): ReportShape | null {
  if (report === null) return null;
  try {
    return JSON.parse(report) as ReportShape;
  } catch {
    return null;
  }
}

export function inMaintenance(
  at: string,
  maintenance: readonly DogfoodMaintenanceRow[],
): DogfoodMaintenanceRow | undefined {
  const t = Date.parse(at);
  return maintenance.find((m) => Date.parse(m.starts_at) <= t && t < Date.parse(m.ends_at));
}

/** Every finding of one job. `cargoOutput` is the settling attempt's retained output, when read. */
export function findingsOfJob(
  ledger: TrialLedger,
  job: TrialJobRow,
  cargoOutput: string | null,
  maintenance: readonly DogfoodMaintenanceRow[],
): LedgerFinding[] {
  const out: LedgerFinding[] = [];
  const finding = (cls: LedgerFindingClass, f: Omit<LedgerFinding, "incidentId" | "class" | "job">) =>
    out.push({ incidentId: `platform:${cls}:${job.id}`, class: cls, job: job.id, ...f });
  const attempts = ledger.attemptsOf(job.id);
  const settling = settlingAttemptOf(ledger, job.id);

  if (job.status === "passed" && settling !== undefined) {
    const evidence = wrongGreenEvidence(settling, cargoOutput);
    if (evidence !== null) {
      finding("wrong_green", {
        records: [ledger.identityOf(job, settling.number)],
        occurredAt: settling.finished_at ?? job.finished_at ?? job.accepted_at,
        serviceBlocking: false,
        detail: `job ${job.id} was reported passed but ${evidence}`,
      });
    }
  }

  const finished = attempts.filter((a) => a.state === "finished");
  if (finished.length >= 2) {
    finding("duplicate_execution", {
      records: finished.map((a) => ledger.identityOf(job, a.number)),
      occurredAt: finished[1]?.finished_at ?? job.accepted_at,
      serviceBlocking: false,
      detail: `attempts ${finished.map((a) => a.number).join(" and ")} of job ${job.id} both ran to the end`,
    });
  }

  const settlements = ledger.settlementsOf(job.id);
  if (settlements.length >= 2) {
    finding("duplicate_charge", {
      records: [ledger.identityOf(job, settling?.number ?? attempts.at(-1)?.number ?? 1)],
      occurredAt: settlements[1]?.at ?? job.accepted_at,
      serviceBlocking: false,
      detail: `job ${job.id} was settled ${settlements.length} times (${settlements.map((s) => `${s.to_status} at ${s.at}`).join(", ")})`,
    });
  }

  if (
    job.tenant_id === ledger.tenants.probe &&
    job.status === "failed" &&
    inMaintenance(job.accepted_at, maintenance) === undefined
  ) {
    const last = attempts.at(-1);
    finding("outage", {
      records: [ledger.identityOf(job, last?.number ?? 1)],
      occurredAt: job.finished_at ?? job.accepted_at,
      serviceBlocking: true,
      detail: `probe ${job.id} failed outside declared maintenance`,
    });
  }

  const lost = attempts.filter((a) => a.state === "lost");
  if (job.status === "passed" && lost.length > 0) {
    finding("bounded_recovery", {
      records: [...lost, ...(settling === undefined ? [] : [settling])].map((a) => ledger.identityOf(job, a.number)),
      occurredAt: lost[0]?.finished_at ?? lost[0]?.started_at ?? job.accepted_at,
      serviceBlocking: false,
      detail: `job ${job.id} lost ${lost.length} attempt(s) with their host and passed on attempt ${settling?.number ?? "?"}`,
    });
  }
  return out;
}

/**
 * The outage a missed probe is, unless it was due inside declared maintenance (rule 11). Its id
 * is the one a failure of the same probe's job would record (`platform:outage:<job>`), so a
 * probe that is both late and then failed is one outage; a reservation that never became a job
 * is named by its canary.
 */
export function findingOfMissedProbe(
  ledger: TrialLedger,
  probe: DueProbe,
  maintenance: readonly DogfoodMaintenanceRow[],
): LedgerFinding | undefined {
  const canary = probe.canary;
  if (probe.outcome !== "missed" || canary === undefined || probe.lateAt === null) return undefined;
  if (inMaintenance(probe.dueAt, maintenance) !== undefined) return undefined;
  const job = probe.job;
  const subject = job?.id ?? canary.id;
  const what =
    job === undefined
      ? `never became a job${canary.submissionError === null ? "" : ` (submission refused: ${canary.submissionError})`}`
      : `its job ${job.id} had not finished by its late bound ${probe.lateAt}`;
  return {
    incidentId: `platform:outage:${subject}`,
    class: "outage",
    job: subject,
    records: job === undefined ? [] : [ledger.identityOf(job, ledger.attemptsOf(job.id).at(-1)?.number ?? 1)],
    occurredAt: probe.lateAt,
    serviceBlocking: true,
    detail: `probe ${canary.id} for host ${canary.hostId}, reserved at ${canary.createdAt} outside declared maintenance, ${what}`,
  };
}
