import { createHash } from "node:crypto";
import type { AttemptReport, PhaseItem } from "@kiln/contract";
import type { AttemptReportRow } from "@kiln/storage";
import { parseAttemptReport } from "../jobs/attempt-report.js";
import { storedJson } from "../jobs/stored-json.js";

/** How many of a repository's most recent finished attempts the advisories rest on. */
export const ADVISORY_WINDOW_ATTEMPTS = 20;

/** One finished attempt of the repository as the advisory kinds read it. */
export interface BasisAttempt {
  readonly jobId: string;
  readonly attempt: number;
  readonly size: string;
  readonly class: string;
  /** The cargo operation (`build`, `test`, …). */
  readonly operation: string;
  readonly report: AttemptReport;
}

/**
 * What one advisory kind found. `basis` lists the measured buckets the finding rests on (never
 * raw timings, which differ on every run): while they stay the same, the advisory keeps its id,
 * so a dismissal holds; when the measurement moves to another bucket, it is a new advisory.
 */
export interface Finding {
  /** The kind, stable across measurements (`cpu-saturated`, …). */
  readonly key: string;
  readonly measuredValue: string;
  readonly recommendation: string;
  readonly basis: readonly (string | number)[];
}

/** One advisory kind: reads the repository's recent attempts (newest first) and finds zero or more. */
export type AdvisoryKind = (attempts: readonly BasisAttempt[]) => Finding[];

/**
 * Where a kind's remediation page lives: `docs/advisories/<key>.md` in kiln's repository (a
 * path relative to the repository root; one page per kind explains the measurement, its
 * threshold and the remedy).
 */
export const remediationHref = (key: string) => `docs/advisories/${key}.md`;

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** The finding's basis signature: a hash of its kind and measured buckets. */
export const basisSignatureOf = (finding: Finding) =>
  sha256(JSON.stringify([finding.key, ...finding.basis])).slice(0, 32);

/** The advisory's id: URL-safe, the same for the same repository, kind and basis. */
export const advisoryIdOf = (repository: string, finding: Finding) =>
  `adv_${finding.key}_${sha256(JSON.stringify([repository, finding.key, basisSignatureOf(finding)])).slice(0, 20)}`;

/** Rows of the storage read (newest first) → attempts with a parsed report; unparseable ones are skipped. */
export function basisAttemptsOf(rows: readonly AttemptReportRow[]): BasisAttempt[] {
  const attempts: BasisAttempt[] = [];
  for (const row of rows) {
    const report = parseAttemptReport(row.report);
    if (report === null) continue;
    const invocation = storedJson<{ operation?: unknown }>(row.invocation);
    attempts.push({
      jobId: row.jobId,
      attempt: row.attempt,
      size: row.size,
      class: row.class,
      operation: typeof invocation?.operation === "string" ? invocation.operation : "build",
      report,
    });
  }
  return attempts;
}

/** The phase cargo itself ran in (`build`, or `test` for test and bench), as run-attempt.ts names it. */
export const cargoPhaseOf = (attempt: BasisAttempt): PhaseItem | undefined => {
  const name = attempt.operation === "test" || attempt.operation === "bench" ? "test" : "build";
  return Array.isArray(attempt.report.phases) ? attempt.report.phases.find((p) => p.name === name) : undefined;
};

export const seconds = (ms: number) => (ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`);
export const percent = (fraction: number) => `${Math.round(fraction * 100)} %`;
export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};
