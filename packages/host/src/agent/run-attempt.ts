import { chmod, mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { AdmittedToolchain, ExecutionResult, Executor } from "../executor/executor.js";
import { type OutputObserver, PhaseClock } from "./attempt-evidence.js";
import { collectArtifacts } from "./collect-artifacts.js";
import type { AttemptRef, AttemptResult, HostProtocol, LogLine, Placement } from "./host-protocol.js";
import { LineSplitter } from "./line-splitter.js";

export interface AttemptRunnerDeps {
  readonly hostId: string;
  readonly protocol: HostProtocol;
  readonly executor: Executor;
  /** Resolves an admitted toolchain, or throws an Error whose message names the admitted ones. */
  readonly resolveToolchain: (name: string) => Promise<AdmittedToolchain>;
  readonly newObserver: (attempt: number) => OutputObserver;
  /** Where attempt directories are made; each attempt gets its own and it is removed after. */
  readonly workRoot: string;
  readonly removeDirectories: (paths: readonly string[]) => Promise<void>;
  readonly heartbeatSeconds?: number;
  /** Most bytes of raw cargo output retained per attempt. */
  readonly cargoOutputLimit?: number;
}

const LOG_FLUSH_MS = 200;

/** Ships log lines in small batches; a stale answer means this attempt lost its lease. */
class LogShipper {
  private buffer: LogLine[] = [];
  private timer: NodeJS.Timeout | null = null;
  private chain: Promise<void> = Promise.resolve();
  stale = false;

  constructor(
    private readonly protocol: HostProtocol,
    private readonly ref: AttemptRef,
  ) {}

  push(line: LogLine): void {
    this.buffer.push(line);
    if (this.buffer.length >= 500) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), LOG_FLUSH_MS);
  }

  flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const lines = this.buffer;
    this.buffer = [];
    if (lines.length > 0) {
      this.chain = this.chain.then(async () => {
        if ((await this.protocol.appendLogs(this.ref, lines)) === "stale") this.stale = true;
      });
    }
    return this.chain;
  }
}

/** `--message-format` goes right after the operation, before any user argument or `--`. */
export function cargoArgv(placement: Placement): string[] {
  const inv = placement.invocation;
  return ["cargo", inv.operation, "--message-format=json-render-diagnostics", ...inv.arguments];
}

function failureOf(placement: Placement, run: ExecutionResult, summary: ReturnType<OutputObserver["summary"]>) {
  const op = placement.invocation.operation;
  switch (run.outcome) {
    case "wall_clock_ceiling":
      return {
        phase: op,
        cause: "wall_clock_ceiling",
        detail: `the attempt ran past its ${placement.wallClockSeconds} s wall-clock ceiling`,
      };
    case "infrastructure":
      return { phase: "provision", cause: "infrastructure", detail: "the sandbox could not run the attempt" };
    case "cancelled":
      return { phase: op, cause: "cancelled", detail: "cancelled; the process tree was reaped" };
    case "exited": {
      if (run.oomKilled) {
        const inTests = (op === "test" || op === "bench") && summary.buildSucceeded === true;
        return {
          phase: inTests ? "test" : "build",
          cause: inTests ? "test_failure" : "build_error",
          detail: `a process exceeded the size's memory (${Math.round(placement.limits.memoryBytes / 2 ** 30)} GiB) and was killed`,
        };
      }
      const testsFailed =
        (op === "test" || op === "bench") && summary.buildSucceeded !== false && summary.failedTests > 0;
      return testsFailed
        ? { phase: "test", cause: "test_failure", detail: `${summary.failedTests} test(s) failed` }
        : { phase: "build", cause: "build_error", detail: `cargo ${op} exited with ${run.exitCode ?? run.signal}` };
    }
  }
}

/**
 * Runs one placed attempt end to end: materializes the exact source bytes, admits the
 * toolchain, runs cargo in the executor while streaming logs and renewing the lease,
 * publishes artifacts and the raw cargo output, reports, and removes every directory
 * of the attempt. Cancellation arrives through the heartbeat answer.
 */
export async function runAttempt(deps: AttemptRunnerDeps, placement: Placement): Promise<void> {
  const ref: AttemptRef = { jobId: placement.jobId, attempt: placement.attempt, leaseToken: placement.leaseToken };
  const base = join(deps.workRoot, `${placement.jobId}-a${placement.attempt}`);
  const dirs = { workspace: join(base, "src"), target: join(base, "target"), home: join(base, "home") };
  const logs = new LogShipper(deps.protocol, ref);
  const system = (text: string) => logs.push({ stream: "system", at: new Date(), text });
  const phases = new PhaseClock();
  const abort = new AbortController();
  let cancelled = false;
  const heartbeat = setInterval(
    () =>
      void deps.protocol.heartbeat(ref).then(
        (answer) => {
          if (answer !== "continue") {
            cancelled = answer === "cancel";
            logs.stale ||= answer === "stale";
            abort.abort();
          }
        },
        () => undefined,
      ),
    (deps.heartbeatSeconds ?? 2) * 1000,
  );
  try {
    system(
      `kiln: attempt ${placement.attempt} of ${placement.jobId} on ${deps.hostId} (${placement.size}: ${placement.limits.vcpus} vCPU, ${Math.round(placement.limits.memoryBytes / 2 ** 30)} GiB)`,
    );
    await phases.run("provision", async () => {
      for (const dir of Object.values(dirs)) await mkdir(dir, { recursive: true });
      for (const entry of placement.source) {
        const path = join(dirs.workspace, entry.path);
        await mkdir(dirname(path), { recursive: true });
        await writeFile(path, await deps.protocol.fetchBlob(entry.sha256));
        await chmod(path, entry.executable ? 0o755 : 0o644);
      }
    });
    let toolchain: AdmittedToolchain;
    try {
      toolchain = await deps.resolveToolchain(placement.toolchain);
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      system(`kiln: toolchain ${placement.toolchain} is not admitted: ${detail}`);
      await logs.flush();
      await finish(deps, ref, logs, {
        outcome: "failed",
        exitCode: null,
        failure: { phase: "provision", cause: "toolchain_not_admitted", detail },
        report: { phases: phases.phases, crates: [], tests: [], unit: null },
        cargoOutput: null,
        artifacts: [],
      });
      return;
    }
    const observer = deps.newObserver(placement.attempt);
    const output: Buffer[] = [];
    let outputBytes = 0;
    const limit = deps.cargoOutputLimit ?? 64 * 2 ** 20;
    const splitters = {
      stdout: new LineSplitter((line) => {
        observer.pushLine("stdout", line);
        // cargo's JSON messages are evidence, not log: they stay in the raw cargo output.
        if (!line.startsWith('{"reason":')) logs.push({ stream: "stdout", at: new Date(), text: line });
      }),
      stderr: new LineSplitter((line) => {
        observer.pushLine("stderr", line);
        logs.push({ stream: "stderr", at: new Date(), text: line });
      }),
    };
    const argv = cargoArgv(placement);
    system(`kiln: ${argv.join(" ")} (toolchain ${toolchain.name}, network offline)`);
    const step =
      placement.invocation.operation === "test" || placement.invocation.operation === "bench" ? "test" : "build";
    const run = await phases.run(
      step,
      () =>
        deps.executor.run({
          attemptId: `${placement.jobId}-a${placement.attempt}`,
          limits: placement.limits,
          workspaceDir: dirs.workspace,
          targetDir: dirs.target,
          homeDir: dirs.home,
          toolchain,
          argv,
          workingDirectory: placement.invocation.working_directory ?? ".",
          environment: {
            ...(placement.invocation.environment ?? {}),
            CARGO_BUILD_JOBS: String(placement.limits.vcpus),
            CARGO_TERM_COLOR: "never",
          },
          wallClockSeconds: placement.wallClockSeconds,
          network: "offline",
          signal: abort.signal,
          onOutput: (stream, chunk) => {
            if (outputBytes < limit) {
              output.push(chunk.subarray(0, limit - outputBytes));
              outputBytes += Math.min(chunk.length, limit - outputBytes);
            }
            splitters[stream].push(chunk);
          },
        }),
      (r) =>
        r.outcome === "exited" && r.exitCode === 0 ? "passed" : r.outcome === "cancelled" ? "cancelled" : "failed",
    );
    splitters.stdout.end();
    splitters.stderr.end();
    observer.end();
    const summary = observer.summary();
    const passed = run.outcome === "exited" && run.exitCode === 0;
    const outcome = run.outcome === "cancelled" || cancelled ? "cancelled" : passed ? "passed" : "failed";
    system(
      `kiln: cargo ${run.outcome === "exited" ? `exited with ${run.exitCode ?? run.signal}` : `ended: ${run.outcome}`} after ${((run.finishedAt.getTime() - run.startedAt.getTime()) / 1000).toFixed(1)} s`,
    );
    for (const note of run.detail) system(`kiln: ${note}`);
    const artifacts = passed
      ? await phases.run("publish", async () => {
          const published = [];
          for (const file of await collectArtifacts(dirs.target, placement.invocation.artifacts ?? [])) {
            const stored = await deps.protocol.putBlob(await file.read());
            published.push({ path: file.path, bytes: stored.bytes, sha256: stored.sha256 });
          }
          return published;
        })
      : [];
    const cargoOutput = await deps.protocol.putBlob(Buffer.concat(output));
    await logs.flush();
    await finish(deps, ref, logs, {
      outcome,
      exitCode: run.exitCode,
      failure:
        outcome === "passed"
          ? null
          : outcome === "cancelled"
            ? { phase: step, cause: "cancelled", detail: "cancelled; the process tree was reaped" }
            : failureOf(placement, run, summary),
      report: {
        phases: phases.phases,
        crates: summary.crates,
        tests: summary.tests,
        unit: {
          id: `${placement.jobId}-a${placement.attempt}`,
          host: deps.hostId,
          isolation: run.isolation,
          started_at: run.startedAt.toISOString(),
          finished_at: run.finishedAt.toISOString(),
          vcpus: placement.limits.vcpus,
          memory_bytes: placement.limits.memoryBytes,
          exit_code: run.exitCode,
          cpu_seconds: run.cpuSeconds,
          peak_memory_bytes: run.peakMemoryBytes,
          oom_killed: run.oomKilled,
        },
      },
      cargoOutput,
      artifacts,
    });
  } finally {
    clearInterval(heartbeat);
    await deps.removeDirectories([base]).catch(() => undefined);
  }
}

async function finish(
  deps: AttemptRunnerDeps,
  ref: AttemptRef,
  logs: LogShipper,
  result: AttemptResult,
): Promise<void> {
  await logs.flush();
  if (logs.stale) return;
  await deps.protocol.finish(ref, result);
}
