import type { AttemptReport, JobAdmission, JobEvidence } from "@kiln/contract";
import type { JobRecord } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { admittedSize, SIZE_SHAPES } from "../policy/platform-limits.js";
import { latestDependencies } from "./job-view.js";
import { storedJson } from "./stored-json.js";

/**
 * What a host stores for one attempt in `attempts.report` is the contract's AttemptReport
 * (records/host-protocol.ts: items without `attempt`); the control plane knows which attempt
 * reported them and adds it when it merges the attempts into JobEvidence.report.
 */
export type EvidenceReport = Static<typeof JobEvidence>["report"];

/** An evidence item as its attempt reported it, marked with the attempt (evidence items are open records). */
function ofAttempt<T extends object>(item: T, attempt: number): T & { attempt: number } {
  return { ...item, attempt };
}

/** A stored report, or null when the attempt has none (still running, or lost). */
export function parseAttemptReport(text: string | null): AttemptReport | null {
  return storedJson<AttemptReport>(text);
}

/**
 * Merges the attempts' stored reports into the contract's JobEvidence.report. Items are
 * concatenated in attempt order with `attempt` set (a host's own `attempt` member never
 * wins: the row it was stored on decides). Every attempt contributes one unit: from its
 * report's `unit` where the host ran one, else from the attempt row itself (host, vCPUs
 * and the size's memory), so a lost or still-running attempt is still accounted for.
 */
export function mergeAttemptReports(record: JobRecord): EvidenceReport {
  const job = record.job;
  const size = admittedSize(job.size);
  const report: EvidenceReport = { phases: [], crates: [], caches: [], injections: [], tests: [], units: [] };
  for (const attempt of record.attempts) {
    const n = attempt.number;
    const stored = parseAttemptReport(attempt.report);
    for (const phase of stored?.phases ?? []) report.phases.push(ofAttempt(phase, n));
    for (const crate of stored?.crates ?? []) report.crates.push(ofAttempt(crate, n));
    for (const cache of stored?.caches ?? []) report.caches.push(ofAttempt(cache, n));
    for (const injection of stored?.injections ?? []) report.injections.push(ofAttempt(injection, n));
    for (const test of stored?.tests ?? []) report.tests.push(ofAttempt(test, n));
    for (const failure of stored?.failures ?? []) {
      report.failures ??= [];
      report.failures.push(ofAttempt(failure, n));
    }
    for (const binary of stored?.test_binaries ?? []) {
      report.test_binaries ??= [];
      report.test_binaries.push(ofAttempt(binary, n));
    }
    // Issue 37: the latest attempt that ran tests says what its retries did.
    if (stored?.retries !== undefined) report.retries = stored.retries;
    if (stored?.timeline !== undefined) {
      report.timeline ??= [];
      report.timeline.push(ofAttempt(stored.timeline, n));
    }
    if (stored?.affected_tests !== undefined) {
      report.affected_tests ??= [];
      report.affected_tests.push({ ...stored.affected_tests, attempt: n });
    }
    const unit = stored?.unit ?? null;
    const shape = SIZE_SHAPES[job.size];
    report.units.push({
      ...(unit ?? {}),
      id: unit?.id ?? `${job.id}-a${n}`,
      host: unit?.host ?? attempt.host_id,
      size,
      isolation: unit?.isolation ?? "sandbox",
      started_at: unit?.started_at ?? attempt.started_at,
      finished_at: unit?.finished_at ?? attempt.finished_at,
      attempt: n,
      vcpus: unit?.vcpus ?? Math.max(1, attempt.vcpus || (shape?.vcpus ?? 1)),
      memory_bytes: unit?.memory_bytes ?? shape?.memoryBytes ?? 1,
      exit_code: unit?.exit_code ?? attempt.exit_code,
    });
  }
  const admitted = storedJson<JobAdmission>(job.admitted);
  if (admitted !== null) {
    // The injections admission decided are reported per attempt, as the host applied them.
    const { injections: _decided, ...rest } = admitted;
    // The generated dependency configuration exists once the host's gateway made it.
    const dependencies = latestDependencies(record.attempts);
    report.admitted =
      dependencies === null ? rest : { ...rest, configuration_sha256: dependencies.configuration_sha256 };
  }
  return report;
}
