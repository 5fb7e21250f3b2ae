import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type KilnClient, KilnTransportError, type OutputOf, serverSentEvents } from "@kiln/client";
import { EXIT } from "./output.js";

/** A job as jobs.get returns it (Job). */
export type Job = OutputOf<"jobs.get">;
/** A job with its evidence report, usage and attempts (JobEvidence). */
export type JobEvidence = OutputOf<"jobs.evidence">;
/** A page of a job's durable log (JobLogPage); jobs.logs_stream's frames carry one as `page`. */
export type LogPage = OutputOf<"jobs.logs">;
/** One record of a job's log (JobLogPage.records). */
export type LogRecord = LogPage["records"][number];

/**
 * Writes one log record as cargo would: stdout lines to stdout, stderr lines to stderr; the
 * service's own lines (stream `system`) go to stderr marked `[kiln]`, unless `service` is false.
 */
export function printRecord(record: LogRecord, service = true): void {
  const line = record.text.endsWith("\n") ? record.text : `${record.text}\n`;
  if (record.stream === "stdout") process.stdout.write(line);
  else if (record.stream === "system") {
    if (service) process.stderr.write(`[kiln] ${line.replace(/^kiln: /, "")}`);
  } else process.stderr.write(line);
}

/**
 * Streams the job's log (jobs.logs_stream) from `cursor` until the log settles, calling
 * `onRecord` for every record in order; a dropped stream is resumed from the last cursor.
 */
export async function followLogs(
  client: KilnClient,
  job: string,
  onRecord: (record: LogRecord) => void,
  cursor?: string,
): Promise<void> {
  let position = cursor;
  let lastSequence = 0;
  for (let reconnects = 0; ; reconnects++) {
    try {
      const response = await client.call("jobs.logs_stream", {
        params: { id: job },
        query: position === undefined ? {} : { cursor: position },
      });
      for await (const event of serverSentEvents(response)) {
        if (event.event !== "log") continue;
        // A JobLogStreamFrame: { job, page: JobLogPage }.
        const page = (event.data as { page: LogPage }).page;
        for (const record of page.records) {
          if (record.sequence <= lastSequence) continue;
          lastSequence = record.sequence;
          onRecord(record);
        }
        if (typeof page.next_cursor === "string") position = page.next_cursor;
        if (page.settled === true) return;
      }
    } catch (error) {
      if (!(error instanceof KilnTransportError) || reconnects > 20) throw error;
    }
    await sleep(Math.min(2000, 200 * (reconnects + 1)));
  }
}

/** Every log record of a job read page by page (jobs.logs), without waiting for more. */
export async function readLogs(client: KilnClient, job: string): Promise<LogRecord[]> {
  const records: LogRecord[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100_000; page++) {
    const doc = await client.call("jobs.logs", {
      params: { id: job },
      query: { limit: 1000, ...(cursor === undefined ? {} : { cursor }) },
    });
    records.push(...doc.records);
    if (doc.next_cursor === null || doc.records.length === 0) break;
    cursor = doc.next_cursor;
  }
  return records;
}

export interface TestCounts {
  passed: number;
  failed: number;
  ignored: number;
}

/** A test that failed, then passed on a re-run (the evidence's `flaky`, a kiln extension): counted passed, named apart. */
export interface FlakyTest {
  readonly test: string;
  /** The try that passed; null when the evidence kept no tries. */
  readonly passedOnTry: number | null;
  readonly tries: number | null;
}

/** Per test binary (`target`), the counts of the evidence's tests of the last attempt. */
export function testSummary(evidence: JobEvidence): {
  total: TestCounts;
  byTarget: Record<string, TestCounts>;
  failed: string[];
  flaky: FlakyTest[];
} {
  const tests = evidence.report?.tests ?? [];
  const lastAttempt = Math.max(0, ...tests.map((t) => t.attempt));
  const total: TestCounts = { passed: 0, failed: 0, ignored: 0 };
  const byTarget: Record<string, TestCounts> = {};
  const failed: string[] = [];
  const flaky: FlakyTest[] = [];
  for (const test of tests) {
    if (test.attempt !== lastAttempt) continue;
    if (test.flaky === true) {
      const tries = test.tries ?? [];
      const passed = tries.find((t) => t.outcome === "passed");
      flaky.push({
        test: `${test.target}: ${test.name}`,
        passedOnTry: passed?.try ?? null,
        tries: tries.length === 0 ? null : tries.length,
      });
    }
    const entry = byTarget[test.target] ?? { passed: 0, failed: 0, ignored: 0 };
    if (test.outcome === "passed" || test.outcome === "failed" || test.outcome === "ignored") {
      entry[test.outcome] += 1;
      total[test.outcome] += 1;
    }
    if (test.outcome === "failed") failed.push(`${test.target}: ${test.name}`);
    byTarget[test.target] = entry;
  }
  return { total, byTarget, failed, flaky };
}

/**
 * The summary's flaky lines, apart from the failures: `flaky: 1 (passed on try 2)` and each
 * flaky test by name, so a pass that needed a re-run is never mistaken for a clean one.
 */
export function describeFlaky(flaky: readonly FlakyTest[]): string[] {
  if (flaky.length === 0) return [];
  const onTry = (f: FlakyTest) => (f.passedOnTry === null ? "passed on a re-run" : `passed on try ${f.passedOnTry}`);
  const phrases = new Set(flaky.map(onTry));
  const [only] = phrases;
  const lines = [`flaky: ${flaky.length} (${phrases.size === 1 && only !== undefined ? only : "passed on a re-run"})`];
  for (const f of flaky) lines.push(`  flaky: ${f.test} (${onTry(f)}${f.tries === null ? "" : ` of ${f.tries}`})`);
  return lines;
}

/** A failure the evidence names (JobEvidence.report.failures, a kiln extension). */
export type ReportedFailure = NonNullable<NonNullable<JobEvidence["report"]>["failures"]>[number];

/** The last attempt's failures: its first compiler errors and its failed tests' panics, in output order. */
export function lastAttemptFailures(evidence: JobEvidence): ReportedFailure[] {
  const failures = evidence.report?.failures ?? [];
  const lastAttempt = Math.max(0, ...failures.map((f) => f.attempt));
  return failures.filter((f) => f.attempt === lastAttempt);
}

/** Panics listed in the closing summary; the rest are counted (every one is in the evidence). */
const SUMMARY_PANICS = 10;
/** A panic's message lines in the closing summary. */
const SUMMARY_MESSAGE_LINES = 6;

/**
 * The closing summary's "what failed" lines, read where a red run ends: each compiler error as
 * rustc heads it (`error[E0277]: …` then ` --> file:line:column`, the file a path of the
 * repository), each failed test's panic (`test x panicked at file:line:column:` then its
 * message, indented), and the log line to read more (`log #123`).
 */
export function describeFailures(failures: readonly ReportedFailure[]): string[] {
  const lines: string[] = [];
  const where = (f: ReportedFailure) =>
    f.location === null ? null : `${f.location.file}:${f.location.line}:${f.location.column}`;
  const logLine = (f: ReportedFailure) => (f.log_sequence === undefined ? "" : ` (log #${f.log_sequence})`);
  const errors = failures.filter((f) => f.kind === "compiler_error");
  for (const error of errors) {
    lines.push(`error${error.code === null ? "" : `[${error.code}]`}: ${error.message}${logLine(error)}`);
    const at = where(error);
    if (at !== null) lines.push(`  --> ${at}`);
  }
  const panics = failures.filter((f) => f.kind === "test_panic");
  for (const panic of panics.slice(0, SUMMARY_PANICS)) {
    const name = [panic.target, panic.test].filter((part) => part !== null).join(": ");
    const at = where(panic);
    lines.push(`${name} ${at === null ? "failed" : `panicked at ${at}`}${logLine(panic)}`);
    const message = panic.message.split("\n");
    for (const line of message.slice(0, SUMMARY_MESSAGE_LINES)) lines.push(`    ${line}`);
    if (message.length > SUMMARY_MESSAGE_LINES)
      lines.push(`    … (${message.length - SUMMARY_MESSAGE_LINES} more lines)`);
  }
  if (panics.length > SUMMARY_PANICS)
    lines.push(`… and ${panics.length - SUMMARY_PANICS} more failed tests (kiln jobs evidence)`);
  return lines;
}

/** Cargo's exit code of the job's last attempt, from the evidence (attempts, else units); null when unknown. */
export function cargoExitCode(evidence: JobEvidence): number | null {
  const attempts = evidence.attempts?.attempts ?? [];
  const units = evidence.report?.units ?? [];
  const last = (rows: readonly { attempt: number; exit_code: number | null }[]) =>
    [...rows].sort((a, b) => b.attempt - a.attempt).find((r) => r.exit_code !== null)?.exit_code ?? null;
  return last(attempts) ?? last(units);
}

/**
 * The exit code a finished job means: 0 passed; cargo's own code when cargo failed (build or
 * test failure; 101 when the evidence has none); EXIT.service for a service-side end.
 */
export function exitCodeOf(job: Job, evidence: JobEvidence): number {
  if (job.status === "passed") return EXIT.ok;
  const cause = job.failure?.cause;
  // A dependency the gateway could not provide fails the build, as local cargo would (101).
  if (job.status === "failed" && cause === "dependencies") return 101;
  if (job.status === "failed" && (cause === "build_error" || cause === "test_failure")) {
    const code = cargoExitCode(evidence);
    return code === null || code === 0 ? 101 : code;
  }
  return EXIT.service;
}

export function describeCounts(counts: TestCounts): string {
  return `${counts.passed} passed; ${counts.failed} failed; ${counts.ignored} ignored`;
}

export interface DownloadedArtifact {
  path: string;
  file: string;
  bytes: number;
  sha256: string;
}

/** Downloads the last publication's files into `directory`, verifying each file's SHA-256. */
export async function downloadArtifacts(
  client: KilnClient,
  job: string,
  directory: string,
): Promise<DownloadedArtifact[]> {
  const inventory = await client.call("jobs.artifacts", { params: { id: job } });
  const publications = inventory.publications ?? [];
  const last = publications.sort((a, b) => b.attempt - a.attempt)[0];
  if (last === undefined) return [];
  const base = resolve(directory);
  const saved: DownloadedArtifact[] = [];
  for (const file of last.files) {
    const target = resolve(base, file.path);
    if (!target.startsWith(base + sep)) throw new Error(`artifact path ${file.path} leaves ${base}`);
    const bytes = await client.call("jobs.artifact_bytes", {
      params: { id: job, attempt: last.attempt, index: file.index },
    });
    const digest = createHash("sha256").update(bytes).digest("hex");
    if (digest !== file.sha256)
      throw new Error(`artifact ${file.path} arrived with SHA-256 ${digest}, not ${file.sha256}`);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, bytes);
    // A built binary keeps the execute bit it had in the target directory, so it runs as downloaded.
    if (file.executable === true) chmodSync(target, 0o755);
    saved.push({ path: file.path, file: join(directory, file.path), bytes: bytes.length, sha256: digest });
  }
  return saved;
}
