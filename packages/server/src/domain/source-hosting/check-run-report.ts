import type { AttemptReport, FailureReportItem } from "@kiln/contract";
import type { JobRecord } from "@kiln/storage";
import { parseAttemptReport } from "../jobs/attempt-report.js";
import { storedJson } from "../jobs/stored-json.js";
import type { CheckRunAnnotation, CheckRunConclusion, CheckRunWrite } from "./github-app.js";

/** The provider caps a check run's summary (and text) at this many characters. */
export const SUMMARY_LIMIT = 65_535;
/** At most this many annotations per check run: past it the summary says how many were left out. */
export const ANNOTATION_LIMIT = 1000;

/** Where a job's check run stands, from its status: null for a status no check run shows. */
export function checkStageOf(status: string): "queued" | "in_progress" | "completed" | null {
  if (status === "queued") return "queued";
  if (status === "running" || status === "cancellation_requested") return "in_progress";
  if (status === "passed" || status === "failed" || status === "cancelled") return "completed";
  return null;
}

/**
 * The conclusion of a finished job's check run. A job the service failed (cause
 * `infrastructure`: a lost host, a placement or report fault) is `neutral`: it says nothing
 * about the commit, and `jobs.retry` (or the provider's re-run) runs it again.
 */
export function conclusionOf(status: string, failureCause: string | null): CheckRunConclusion {
  if (status === "passed") return "success";
  if (status === "cancelled" || failureCause === "cancelled") return "cancelled";
  if (failureCause === "wall_clock_ceiling") return "timed_out";
  if (failureCause === "infrastructure") return "neutral";
  return "failure";
}

/**
 * The completed check run of a finished job: conclusion, a summary (tests passed, failed and
 * ignored, duration, cache warm or cold, the evidence link) and annotations — every failed
 * test at the file and line of its panic, each flaky test as a warning where its failed try
 * panicked, and compiler errors and warnings at their primary spans — read from the final attempt's raw cargo output (cargo's JSON messages and libtest's
 * output).
 */
export function completedCheckRun(
  record: JobRecord,
  cargoOutput: string | null,
  publicOrigin: string,
): CheckRunWrite & { output: { title: string; summary: string; annotations: CheckRunAnnotation[] } } {
  const job = record.job;
  const failure = storedJson<{ cause?: string; phase?: string; detail?: string }>(job.failure);
  const conclusion = conclusionOf(job.status, failure?.cause ?? null);
  const last = record.attempts.at(-1);
  const report: AttemptReport | null = parseAttemptReport(last?.report ?? null);
  const tests = report?.tests ?? [];
  const flaky = flakyTestsOf(tests);
  const flakyNames = new Set(flaky.map((t) => t.name));
  const count = (outcome: string) => tests.filter((t) => t.outcome === outcome).length;
  const passed = count("passed");
  const failed = count("failed");
  const ignored = count("ignored");
  // The job's own lineage (its class), not the dependency gateway's crate cache listed beside it.
  const cache = report?.caches?.find((item) => item.class === job.class);
  const seconds =
    job.started_at !== null && job.finished_at !== null
      ? Math.max(0, Math.round((Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000))
      : null;
  // The host's failures name repository paths and whole messages; a report stored before the
  // host reported them is read from the raw output as it always was.
  // A flaky test's first panic is no failure: it is annotated once, as a warning (issue 37).
  const all = [
    ...(report?.failures === undefined
      ? annotationsOf(
          cargoOutput ?? "",
          new Set(tests.filter((t) => t.outcome === "failed").map((t) => t.name)),
          flakyNames,
        )
      : failureAnnotations(report.failures.filter((f) => f.kind !== "test_panic" || !flakyNames.has(f.test ?? "")))),
    ...flakyAnnotations(flaky, report?.failures ?? []),
  ];
  const annotations = inRepositoryOf(all, storedJson<{ repository_directory?: string }>(job.invocation)).slice(
    0,
    ANNOTATION_LIMIT,
  );
  const title =
    conclusion === "success"
      ? `passed: ${passed} tests passed${flaky.length === 0 ? "" : ` (${flaky.length} flaky)`}, ${ignored} ignored`
      : conclusion === "neutral"
        ? "kiln could not finish this job (not a result of the commit)"
        : `${job.status}${failure?.cause === undefined ? "" : ` (${failure.cause.replaceAll("_", " ")})`}: ${failed} tests failed`;
  const lines = [
    `**${job.description}** on \`${job.size}\`: ${job.status}.`,
    "",
    `| tests passed | tests failed | tests ignored | duration | cache |`,
    `|---|---|---|---|---|`,
    `| ${passed} | ${failed} | ${ignored} | ${seconds === null ? "—" : `${seconds} s`} | ${cache === undefined ? "—" : `${cache.outcome}${cache.reason === null || cache.reason === undefined ? "" : ` (${cache.reason})`}`} |`,
    "",
  ];
  if (flaky.length > 0) {
    const names = flaky.map((t) => `\`${t.name}\``).join(", ");
    lines.push(
      `Flaky: ${flaky.length} ${flaky.length === 1 ? "test" : "tests"} failed, then passed on a re-run: ${names}.`,
      "",
    );
  }
  if (failure !== null && failure.detail !== undefined) {
    lines.push(`Failed in phase \`${failure.phase ?? "?"}\`: ${failure.detail}`, "");
  }
  if (all.length > annotations.length) {
    lines.push(`${all.length - annotations.length} further annotations are left out; the evidence has every one.`, "");
  }
  lines.push(`Evidence: ${publicOrigin}/api/jobs/${encodeURIComponent(job.id)}/evidence`);
  let summary = lines.join("\n");
  if (summary.length > SUMMARY_LIMIT) summary = `${summary.slice(0, SUMMARY_LIMIT - 1)}…`;
  return {
    status: "completed",
    conclusion,
    ...(job.finished_at === null ? {} : { completed_at: job.finished_at }),
    output: { title, summary, annotations },
  };
}

/**
 * Annotations with their paths in the git repository: the job's paths are the captured Cargo
 * workspace's, which may live in a folder of the repository (the invocation's kiln extension
 * `repository_directory`, `rust`), and a check run's annotation names the repository's path.
 */
function inRepositoryOf(
  annotations: readonly CheckRunAnnotation[],
  invocation: { repository_directory?: string } | null,
): CheckRunAnnotation[] {
  const directory = invocation?.repository_directory;
  if (directory === undefined || directory === "") return [...annotations];
  return annotations.map((a) => ({ ...a, path: `${directory}/${a.path}` }));
}

/**
 * Annotations from the attempt's reported failures: each compiler error (as rustc rendered it)
 * and each failed test's panic (its message) at its location, where that is a file of the
 * repository (a dependency's or the standard library's file cannot be annotated).
 */
export function failureAnnotations(failures: readonly FailureReportItem[]): CheckRunAnnotation[] {
  return failures.flatMap((f) => {
    if (f.location === null || !f.location.in_repository) return [];
    const at = { path: f.location.file, start_line: f.location.line, end_line: f.location.line };
    if (f.kind === "compiler_error") {
      const title = `error${f.code === null ? "" : `[${f.code}]`}: ${f.message}`;
      return [{ ...at, annotation_level: "failure", title, message: (f.rendered ?? title).slice(0, 64 * 1024) }];
    }
    const test = escapeTestPath(f.test ?? f.target ?? "a test");
    return [
      {
        ...at,
        annotation_level: "failure",
        title: `test ${test} failed`,
        message: `test ${test} panicked here: ${f.message}`.slice(0, 64 * 1024),
      },
    ];
  });
}

/** A test of the report with issue 37's members (kiln extensions of the open test item). */
type FlakyTest = AttemptReport["tests"][number] & {
  readonly flaky?: boolean;
  readonly tries?: readonly { try: number; outcome: string; output: string }[];
};

function flakyTestsOf(tests: AttemptReport["tests"]): FlakyTest[] {
  return (tests as FlakyTest[]).filter((t) => t.flaky === true);
}

/**
 * A warning at each flaky test (failed, then passed on a re-run): where its failed try panicked,
 * from the reported failures when they name it, else from that try's captured output. A flaky
 * test whose panic is in no file of the repository is named in the summary only.
 */
export function flakyAnnotations(
  flaky: readonly FlakyTest[],
  failures: readonly FailureReportItem[],
): CheckRunAnnotation[] {
  return flaky.flatMap((t) => {
    const tries = t.tries ?? [];
    const failedTry = tries.find((x) => x.outcome === "failed");
    const passedTry = tries.find((x) => x.outcome === "passed");
    const test = escapeTestPath(t.name);
    const verdict =
      passedTry === undefined ? "passed on a re-run" : `passed on try ${passedTry.try} of ${tries.length}`;
    const reported = failures.find((f) => f.kind === "test_panic" && f.test === t.name);
    let at: { path: string; line: number; message: string | null } | null = null;
    if (reported?.location?.in_repository === true) {
      at = { path: reported.location.file, line: reported.location.line, message: reported.message };
    } else {
      for (const line of (failedTry?.output ?? "").split("\n")) {
        const panic = PANIC.exec(line) ?? OLD_PANIC.exec(line);
        const path = sourcePath(panic?.groups?.file ?? "");
        const lineNumber = Number(panic?.groups?.line);
        if (panic?.groups?.test !== t.name || path === null || !Number.isInteger(lineNumber) || lineNumber < 1)
          continue;
        at = { path, line: lineNumber, message: panic.groups.message ?? null };
        break;
      }
    }
    if (at === null) return [];
    return [
      {
        path: at.path,
        start_line: at.line,
        end_line: at.line,
        annotation_level: "warning",
        title: `test ${test} is flaky`,
        message:
          `test ${test} failed here on try ${failedTry?.try ?? 1}, then ${verdict}${at.message === null ? "" : `: ${at.message}`}`.slice(
            0,
            64 * 1024,
          ),
      },
    ];
  });
}

/** Where the sandbox puts the source: cargo names workspace files under it when it names them absolutely. */
const SOURCE_ROOT = "/kiln/src/";

/**
 * Annotations from raw cargo output: compiler errors and warnings from cargo's JSON messages
 * (`reason: compiler-message`, at the primary span; files outside the source left out), and a
 * failure at each failed test's panic (libtest's `thread '<test>' panicked at <file>:<line>:<col>`).
 */
export function annotationsOf(
  cargoOutput: string,
  failedTests: ReadonlySet<string>,
  flakyTests: ReadonlySet<string> = new Set(),
): CheckRunAnnotation[] {
  const annotations: CheckRunAnnotation[] = [];
  const seen = new Set<string>();
  const add = (a: CheckRunAnnotation) => {
    const key = `${a.path}:${a.start_line}:${a.annotation_level}:${a.message}`;
    if (seen.has(key)) return;
    seen.add(key);
    annotations.push(a);
  };
  for (const line of cargoOutput.split("\n")) {
    if (line.startsWith("{")) {
      const message = compilerMessageOf(line);
      if (message !== null) add(message);
      continue;
    }
    const panic = PANIC.exec(line) ?? OLD_PANIC.exec(line);
    if (panic?.groups === undefined) continue;
    const test = panic.groups.test ?? "";
    if ((failedTests.size > 0 && !failedTests.has(test)) || flakyTests.has(test)) continue;
    const path = sourcePath(panic.groups.file ?? "");
    const lineNumber = Number(panic.groups.line);
    if (path === null || !Number.isInteger(lineNumber) || lineNumber < 1) continue;
    add({
      path,
      start_line: lineNumber,
      end_line: lineNumber,
      annotation_level: "failure",
      title: `test ${escapeTestPath(test)} failed`,
      message: `test ${escapeTestPath(test)} panicked here${panic.groups.message === undefined ? "" : `: ${panic.groups.message}`}`,
    });
  }
  return annotations;
}

// Rust 1.89 and later name the thread's id after its name: `thread 'tests::x' (4242) panicked at`.
const PANIC = /^thread '(?<test>[^']+)'(?: \(\d+\))? panicked at (?<file>[^\s:]+):(?<line>\d+):(?<col>\d+):?$/;
const OLD_PANIC =
  /^thread '(?<test>[^']+)'(?: \(\d+\))? panicked at '(?<message>.*)', (?<file>[^\s:]+):(?<line>\d+):(?<col>\d+)$/;

/**
 * Rust test paths contain `::`, which the provider's annotation text would read as its own
 * command syntax; a zero-width space between the colons keeps the path readable.
 */
export function escapeTestPath(path: string): string {
  return path.replaceAll("::", ":\u200b:");
}

function sourcePath(file: string): string | null {
  const relative = file.startsWith(SOURCE_ROOT) ? file.slice(SOURCE_ROOT.length) : file;
  if (relative.startsWith("/") || relative.split("/").includes("..") || relative.length === 0) return null;
  return relative;
}

interface CompilerMessage {
  reason?: string;
  message?: {
    level?: string;
    message?: string;
    rendered?: string | null;
    spans?: { file_name?: string; line_start?: number; line_end?: number; is_primary?: boolean }[];
  };
}

function compilerMessageOf(line: string): CheckRunAnnotation | null {
  let parsed: CompilerMessage;
  try {
    parsed = JSON.parse(line) as CompilerMessage;
  } catch {
    return null;
  }
  if (parsed.reason !== "compiler-message" || parsed.message === undefined) return null;
  const level = parsed.message.level;
  if (level !== "error" && level !== "warning") return null;
  const span = parsed.message.spans?.find((s) => s.is_primary === true);
  if (span?.file_name === undefined || span.line_start === undefined) return null;
  const path = sourcePath(span.file_name);
  if (path === null) return null;
  return {
    path,
    start_line: span.line_start,
    end_line: span.line_end ?? span.line_start,
    annotation_level: level === "error" ? "failure" : "warning",
    title: parsed.message.message ?? level,
    message: (parsed.message.rendered ?? parsed.message.message ?? level).slice(0, 64 * 1024),
  };
}
