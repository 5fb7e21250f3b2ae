import type { JobRecord } from "@kiln/storage";
import { parseJson, SIZE_SHAPES } from "./job-view.js";

/**
 * What a host stores for one attempt in `attempts.report` (JSON text, written through
 * finishAttempt). Items are the contract's evidence items without `attempt`: the
 * control plane knows which attempt reported them and adds it when it merges the
 * attempts into JobEvidence.report (mergeAttemptReports). Members beyond these are
 * kept: every item is an open record.
 *
 * ```json
 * {
 *   "phases":     [{"name": "build", "status": "passed", "started_at": "…", "finished_at": "…", "duration_ms": 812}],
 *   "crates":     [{"name": "serde", "version": "1.0.210", "source": "registry", "outcome": "fresh", "duration_ms": null}],
 *   "tests":      [{"target": "kiln (lib)", "name": "tests::adds", "outcome": "passed", "duration_ms": 3}],
 *   "caches":     [{"lineage": "…", "class": "…", "outcome": "warm", "reason": null, "restored_bytes": 1, "saved_bytes": null}],
 *   "injections": [{"setting": "profile.dev.debug", "value": "0", "origin": "platform default", "status": "applied", "detail": "…"}],
 *   "unit": {"id": "job-a1", "host": "host-1", "isolation": "sandbox", "started_at": "…", "finished_at": "…",
 *            "vcpus": 2, "memory_bytes": 4294967296, "exit_code": 0}
 * }
 * ```
 *
 * `caches` and `injections` may be absent (nothing restored, nothing injected); `unit`
 * is null when the attempt ended before an isolated unit ran (e.g. the toolchain was
 * not admitted). A running or lost attempt has no report at all (the column is null).
 */
export interface AttemptReport {
  readonly phases: readonly ReportPhase[];
  readonly crates: readonly ReportCrate[];
  readonly tests: readonly ReportTest[];
  readonly caches?: readonly ReportCache[];
  readonly injections?: readonly ReportInjection[];
  /** What affected_tests decided for the attempt (absent: not a test job and the setting off). */
  readonly affected_tests?: ReportAffectedTests;
  readonly unit: ReportUnit | null;
  readonly [extra: string]: unknown;
}

type Open<T> = T & { readonly [extra: string]: unknown };

export type ReportPhase = Open<{
  /** provision, restore, fetch, build, test, publish, save or reap. */
  name: string;
  status: "pending" | "running" | "passed" | "failed" | "skipped" | "cancelled";
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
}>;

export type ReportCrate = Open<{
  name: string;
  version: string;
  source: "workspace" | "registry" | "git";
  outcome: "fresh" | "compiled" | "failed";
  duration_ms: number | null;
}>;

export type ReportTest = Open<{
  target: string;
  name: string;
  outcome: "passed" | "failed" | "ignored";
  duration_ms: number | null;
}>;

export type ReportCache = Open<{
  lineage: string;
  class: string;
  outcome: "warm" | "cold";
  reason: string | null;
  restored_bytes: number;
  saved_bytes: number | null;
}>;

export type ReportInjection = Open<{
  setting: string;
  value: string;
  origin: string;
  status: "applied" | "not applied";
  detail: string;
}>;

export type ReportAffectedTests = Open<{
  enabled: boolean;
  applied: boolean;
  reason: string;
  baseline: { job: string; restored_generation: number | null } | null;
  changed_files: number | null;
  affected: string[];
  skipped: string[];
  ran_cargo: boolean;
}>;

export type ReportUnit = Open<{
  id: string;
  host: string;
  isolation: "sandbox" | "microvm";
  started_at: string | null;
  finished_at: string | null;
  vcpus: number;
  memory_bytes: number;
  exit_code: number | null;
}>;

/** The admitted toolchain and network policy, as stored in jobs.admitted at submission. */
export interface AdmittedRecord {
  readonly toolchain: string;
  readonly toolchain_origin: "invocation" | "rust-toolchain-file" | "host-default";
  readonly network_policy: "offline" | "dependency-gateway";
  readonly configuration_sha256: string | null;
  readonly [extra: string]: unknown;
}

/** JobEvidence.report: every attempt's items in attempt order, each carrying its attempt. */
export interface EvidenceReport {
  phases: (ReportPhase & { attempt: number })[];
  crates: (ReportCrate & { attempt: number })[];
  caches: (ReportCache & { attempt: number })[];
  injections: (ReportInjection & { attempt: number })[];
  tests: (ReportTest & { attempt: number })[];
  units: (ReportUnit & { attempt: number; size: string })[];
  affected_tests?: (ReportAffectedTests & { attempt: number })[];
  admitted?: AdmittedRecord;
}

/** A stored report, or null when the attempt has none (still running, or lost). */
export function parseAttemptReport(text: string | null): AttemptReport | null {
  const value = parseJson<unknown>(text);
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as AttemptReport) : null;
}

const itemsOf = <T>(items: readonly T[] | undefined): readonly T[] => (Array.isArray(items) ? items : []);

/**
 * Merges the attempts' stored reports into the contract's JobEvidence.report. Items are
 * concatenated in attempt order with `attempt` set (a host's own `attempt` member never
 * wins: the row it was stored on decides). Every attempt contributes one unit: from its
 * report's `unit` where the host ran one, else from the attempt row itself (host, vCPUs
 * and the size's memory), so a lost or still-running attempt is still accounted for.
 */
export function mergeAttemptReports(record: JobRecord): EvidenceReport {
  const job = record.job;
  const report: EvidenceReport = { phases: [], crates: [], caches: [], injections: [], tests: [], units: [] };
  for (const attempt of record.attempts) {
    const n = attempt.number;
    const stored = parseAttemptReport(attempt.report);
    for (const phase of itemsOf(stored?.phases)) report.phases.push({ ...phase, attempt: n });
    for (const crate of itemsOf(stored?.crates)) report.crates.push({ ...crate, attempt: n });
    for (const cache of itemsOf(stored?.caches)) report.caches.push({ ...cache, attempt: n });
    for (const injection of itemsOf(stored?.injections)) report.injections.push({ ...injection, attempt: n });
    for (const test of itemsOf(stored?.tests)) report.tests.push({ ...test, attempt: n });
    const affected = stored?.affected_tests;
    if (affected !== null && typeof affected === "object" && !Array.isArray(affected)) {
      report.affected_tests ??= [];
      report.affected_tests.push({ ...affected, attempt: n });
    }
    const unit = stored?.unit ?? null;
    const shape = SIZE_SHAPES[job.size];
    report.units.push({
      ...(unit ?? {}),
      id: unit?.id ?? `${job.id}-a${n}`,
      host: unit?.host ?? attempt.host_id,
      size: job.size,
      isolation: unit?.isolation ?? "sandbox",
      started_at: unit?.started_at ?? attempt.started_at,
      finished_at: unit?.finished_at ?? attempt.finished_at,
      attempt: n,
      vcpus: unit?.vcpus ?? Math.max(1, attempt.vcpus || (shape?.vcpus ?? 1)),
      memory_bytes: unit?.memory_bytes ?? shape?.memoryBytes ?? 1,
      exit_code: unit?.exit_code ?? attempt.exit_code,
    });
  }
  const admitted = parseJson<AdmittedRecord>(job.admitted);
  if (admitted !== null) {
    // The injections admission decided are reported per attempt, as the host applied them.
    const { injections: _decided, ...rest } = admitted;
    report.admitted = rest as AdmittedRecord;
  }
  return report;
}
