import {
  type FailureLocation,
  FLAKY_POLICY_DEFAULT,
  FLAKY_RETRIES_DEFAULT,
  type FlakyPolicy,
  type RetriesItem,
  type TestBinaryItem,
} from "@kiln/contract";
import type { ReportTestItem } from "../../evidence/report-items.js";
import type { AdmittedToolchain, ExecutionResult } from "../../executor/executor.js";
import type { OutputSummary } from "../attempt-evidence.js";
import { SANDBOX_MOUNTS } from "../attempt-lineage.js";
import type { Placement } from "../host-protocol.js";
import { LineSplitter } from "../line-splitter.js";
import { cargoWorkspaceRoot, inRepository } from "../repository-paths.js";
import type { AttemptContext } from "./attempt-context.js";
import { FailureLines } from "./failure-lines.js";
import { injectedEnvironment } from "./injections.js";
import type { ProvidedForBuild } from "./provide-dependencies.js";
import { TestRunMarkers } from "./test-run-markers.js";
import {
  LOGFILE_WARNING,
  shownTestRunnerConfig,
  testRunnerConfig,
  testRunnerTarget,
  withoutReportedTime,
} from "./test-runner.js";

/** Operations cargo times with `--timings` (build and test jobs; a report changes nothing cargo builds). */
const TIMED_OPERATIONS = new Set(["build", "check", "test", "bench"]);

/** Where cargo writes its latest `--timings` report, relative to the target dir (and the artifact's path). */
export const CARGO_TIMINGS_REPORT = "cargo-timings/cargo-timing.html";

/**
 * The command as the executor runs it: cargo, after removing the timestamped `--timings` reports
 * earlier jobs left (`cargo-timings/cargo-timing-<time>.html`, one per run beside
 * `cargo-timing.html`): a lineage's target dir outlives its jobs and would keep every one. `exec`
 * leaves cargo the process the executor signals and whose status it reads.
 */
export function withoutEarlierTimingReports(argv: readonly string[]): string[] {
  return [
    "/bin/sh",
    "-c",
    'rm -f -- "$CARGO_TARGET_DIR"/cargo-timings/cargo-timing-*.html; exec "$@"',
    "kiln-cargo",
    ...argv,
  ];
}

/**
 * `--message-format` goes right after the operation, before any user argument or `--`; the
 * dependency gateway's generated configuration (`--config`, which outranks every other Cargo
 * configuration) before the operation.
 */
export function cargoArgv(
  placement: Placement,
  args: readonly string[] = placement.invocation.arguments,
  cargoConfig: string | null = null,
  runnerConfig: string | null = null,
): string[] {
  return [
    "cargo",
    ...(cargoConfig === null ? [] : ["--config", cargoConfig]),
    ...(runnerConfig === null ? [] : ["--config", runnerConfig]),
    placement.invocation.operation,
    "--message-format=json-render-diagnostics",
    ...(TIMED_OPERATIONS.has(placement.invocation.operation) ? ["--timings"] : []),
    ...args,
  ];
}

/** cargo's line (stderr) saying its build is done: what follows in a test job is the test binaries. */
const BUILD_FINISHED = /^\s*Finished /;

/** The phase cargo runs in: `test` for test and bench jobs, `build` for the rest. */
export function cargoStep(placement: Placement): "test" | "build" {
  const op = placement.invocation.operation;
  return op === "test" || op === "bench" ? "test" : "build";
}

export interface CargoRun {
  /** null: cargo did not run (affected_tests found nothing to test). */
  readonly run: ExecutionResult | null;
  readonly summary: OutputSummary;
  /** cargo's raw output, up to the retained limit. */
  readonly output: Buffer;
  /** Test jobs run through kiln's test runner: each binary's measured wall time and what the flaky retries did. */
  readonly testRuns: { readonly testBinaries: TestBinaryItem[]; readonly retries: RetriesItem } | null;
}

/** The repository's flaky settings as placed (a job admitted before them: the platform defaults). */
export function flakySettings(placement: Placement): { retries: number; policy: FlakyPolicy } {
  return {
    retries: placement.flakyRetries ?? FLAKY_RETRIES_DEFAULT,
    policy: placement.flakyPolicy ?? FLAKY_POLICY_DEFAULT,
  };
}

/**
 * Phase `build` or `test`: cargo in the executor with the job's directories at the sandbox's
 * fixed mount points, its output split into log lines (cargo's JSON messages stay out of the
 * log, in the retained raw output) and read by the evidence parser as it streams.
 */
export async function runCargo(
  attempt: AttemptContext,
  input: {
    readonly toolchain: AdmittedToolchain;
    readonly targetDir: string;
    readonly warmTarget: boolean;
    /** The arguments to run with, or null to run no cargo at all. */
    readonly arguments: readonly string[] | null;
    /** What the dependency gateway provided (a dependency-gateway job), else null. */
    readonly provided: ProvidedForBuild | null;
    /** Called once when a test job's build is finished (cargo's `Finished` line), before its test binaries run. */
    readonly onBuildFinished?: () => void;
  },
): Promise<CargoRun> {
  const { deps, placement, dirs } = attempt;
  const observer = deps.newObserver(placement.attempt);
  const kept: Buffer[] = [];
  let keptBytes = 0;
  const limit = deps.cargoOutputLimit ?? 64 * 2 ** 20;
  const lines = new FailureLines();
  let runner: { triple: string } | null = null;
  const markers = new TestRunMarkers((executable, exitCode) => observer.testBinaryExited?.(executable, exitCode));
  let onBuildFinished = cargoStep(placement) === "test" ? input.onBuildFinished : undefined;
  const splitters = {
    stdout: new LineSplitter((line) => {
      if (markers.marker(line)) return;
      // The log reads as local cargo's: the runner's --report-time is the parser's, not the text's.
      const shown = runner === null ? line : withoutReportedTime(line);
      // A re-run's output is the log's and its try's, not a test binary cargo ran.
      if (markers.inTry) return markers.tryOutput(shown, attempt.logs.push("stdout", shown));
      observer.pushLine("stdout", line);
      if (!line.startsWith('{"reason":')) lines.note(shown, attempt.logs.push("stdout", shown));
    }),
    stderr: new LineSplitter((written) => {
      // libtest writes its warning about the runner's --logfile with no newline, once per run of a
      // binary: they pile up at the start of the job's next stderr line.
      const line = runner !== null ? written.replaceAll(LOGFILE_WARNING, "") : written;
      if (line === "" && written !== "") return;
      if (markers.inTry) return markers.tryOutput(line, attempt.logs.push("stderr", line));
      if (onBuildFinished !== undefined && BUILD_FINISHED.test(line)) {
        onBuildFinished();
        onBuildFinished = undefined;
      }
      observer.pushLine("stderr", line);
      lines.note(line, attempt.logs.push("stderr", line));
    }),
  };
  const step = cargoStep(placement);
  const flaky = flakySettings(placement);
  let run: ExecutionResult | null = null;
  if (input.arguments === null) {
    attempt.phases.record(step, deps.clock.now(), "skipped");
    attempt.system("kiln: cargo did not run: no package's tests are affected by the change since the baseline");
  } else {
    if (step === "test") {
      const target = testRunnerTarget({
        arguments: input.arguments,
        environment: placement.invocation.environment ?? {},
        workspace: dirs.workspace,
        workingDirectory: placement.invocation.working_directory ?? ".",
      });
      if ("skipped" in target) {
        attempt.system(
          `kiln: test binaries run as cargo runs them (no measured durations, no flaky retries): ${target.skipped}`,
        );
      } else runner = target;
    }
    const cargoConfig = input.provided?.cargoConfig ?? null;
    const argv = cargoArgv(
      placement,
      input.arguments,
      cargoConfig,
      runner === null ? null : testRunnerConfig(runner.triple, flaky.retries, flaky.policy),
    );
    // The command as the job asked for it; the runner's configuration on a line of its own.
    const shown = cargoArgv(placement, input.arguments, cargoConfig);
    attempt.system(`kiln: ${shown.join(" ")} (toolchain ${input.toolchain.name}, no network)`);
    if (runner !== null) {
      attempt.system(
        `kiln: with --config ${shownTestRunnerConfig(runner.triple, flaky.retries, flaky.policy)}: each test binary's wall time and (libtest --report-time) each test's duration are measured; a failed test is re-run by its exact name up to ${flaky.retries} time(s)`,
      );
    }
    attempt.startCeiling();
    run = await attempt.phases.run(
      step,
      () =>
        deps.isolation.executor.run({
          attemptId: attempt.attemptId,
          limits: placement.limits,
          workspaceDir: dirs.workspace,
          targetDir: input.targetDir,
          homeDir: dirs.home,
          mounts: SANDBOX_MOUNTS,
          ...(input.provided === null ? {} : { readOnlyBinds: input.provided.readOnlyBinds }),
          warmTarget: input.warmTarget,
          toolchain: input.toolchain,
          argv: TIMED_OPERATIONS.has(placement.invocation.operation) ? withoutEarlierTimingReports(argv) : argv,
          workingDirectory: placement.invocation.working_directory ?? ".",
          environment: {
            ...(placement.invocation.environment ?? {}),
            ...injectedEnvironment(placement),
            ...(input.provided?.dependencies.environment ?? {}),
            CARGO_TERM_COLOR: "never",
          },
          wallClockSeconds: attempt.ceilingLeftSeconds(),
          network: "offline",
          signal: attempt.abort.signal,
          onOutput: (stream, chunk) => {
            if (keptBytes < limit) {
              kept.push(chunk.subarray(0, limit - keptBytes));
              keptBytes += Math.min(chunk.length, limit - keptBytes);
            }
            splitters[stream].push(chunk);
          },
        }),
      (r) =>
        r.outcome === "exited" && r.exitCode === 0 ? "passed" : r.outcome === "cancelled" ? "cancelled" : "failed",
    );
  }
  splitters.stdout.end();
  splitters.stderr.end();
  observer.end(run?.outcome === "cancelled" || run?.outcome === "wall_clock_ceiling");
  if (run !== null) {
    const seconds = ((run.finishedAt.getTime() - run.startedAt.getTime()) / 1000).toFixed(1);
    attempt.system(
      `kiln: cargo ${run.outcome === "exited" ? `exited with ${run.exitCode ?? run.signal}` : `ended: ${run.outcome}`} after ${seconds} s`,
    );
    for (const note of run.detail) attempt.system(`kiln: ${note}`);
  }
  const observed = await inRepositoryPaths(attempt, lines.attach(observer.summary()));
  if (runner === null) return { run, summary: observed, output: Buffer.concat(kept), testRuns: null };
  const applied = markers.apply(observed, flaky);
  const { retries } = applied;
  if (retries.reruns > 0) {
    attempt.system(
      `kiln: flaky retries (flaky_retries ${retries.flaky_retries}, flaky_policy ${retries.flaky_policy}): ${retries.reruns} re-run(s); ${retries.flaky} test(s) flaky (failed, then passed), ${retries.failed_every_try} failed every try`,
    );
  }
  return {
    run,
    summary: applied.summary,
    output: Buffer.concat(kept),
    testRuns: { testBinaries: applied.testBinaries, retries },
  };
}

/** The summary with its failures' and panics' files named as paths of the submitted repository. */
async function inRepositoryPaths(attempt: AttemptContext, summary: OutputSummary): Promise<OutputSummary> {
  const hasLocation =
    summary.failures.some((f) => f.location !== null) ||
    summary.tests.some((t) => (t as ReportTestItem).panic?.location != null);
  if (!hasLocation) return summary;
  const root = await cargoWorkspaceRoot(attempt.dirs.workspace, attempt.placement.invocation.working_directory ?? ".");
  const map = (location: FailureLocation | null) =>
    location === null ? null : inRepository(location, root, SANDBOX_MOUNTS.workspace);
  return {
    ...summary,
    failures: summary.failures.map((f) => ({ ...f, location: map(f.location) })),
    tests: summary.tests.map((t) => {
      const panic = (t as ReportTestItem).panic;
      return panic === undefined ? t : { ...t, panic: { ...panic, location: map(panic.location) } };
    }),
  };
}
