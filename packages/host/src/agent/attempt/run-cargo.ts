import type { FailureLocation } from "@kiln/contract";
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

/**
 * `--message-format` goes right after the operation, before any user argument or `--`; the
 * dependency gateway's generated configuration (`--config`, which outranks every other Cargo
 * configuration) before the operation.
 */
export function cargoArgv(
  placement: Placement,
  args: readonly string[] = placement.invocation.arguments,
  cargoConfig: string | null = null,
): string[] {
  return [
    "cargo",
    ...(cargoConfig === null ? [] : ["--config", cargoConfig]),
    placement.invocation.operation,
    "--message-format=json-render-diagnostics",
    ...args,
  ];
}

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
  },
): Promise<CargoRun> {
  const { deps, placement, dirs } = attempt;
  const observer = deps.newObserver(placement.attempt);
  const kept: Buffer[] = [];
  let keptBytes = 0;
  const limit = deps.cargoOutputLimit ?? 64 * 2 ** 20;
  const lines = new FailureLines();
  const splitters = {
    stdout: new LineSplitter((line) => {
      observer.pushLine("stdout", line);
      if (!line.startsWith('{"reason":')) lines.note(line, attempt.logs.push("stdout", line));
    }),
    stderr: new LineSplitter((line) => {
      observer.pushLine("stderr", line);
      lines.note(line, attempt.logs.push("stderr", line));
    }),
  };
  const step = cargoStep(placement);
  let run: ExecutionResult | null = null;
  if (input.arguments === null) {
    attempt.phases.record(step, deps.clock.now(), "skipped");
    attempt.system("kiln: cargo did not run: no package's tests are affected by the change since the baseline");
  } else {
    const argv = cargoArgv(placement, input.arguments, input.provided?.cargoConfig ?? null);
    attempt.system(`kiln: ${argv.join(" ")} (toolchain ${input.toolchain.name}, no network)`);
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
          argv,
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
  const summary = await inRepositoryPaths(attempt, lines.attach(observer.summary()));
  return { run, summary, output: Buffer.concat(kept) };
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
