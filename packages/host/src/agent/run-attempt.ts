import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { AdmittedToolchain, ExecutionResult, Executor } from "../executor/executor.js";
import { invocationKey, planAffectedTests } from "./affected-tests.js";
import { type OutputObserver, PhaseClock } from "./attempt-evidence.js";
import { AttemptLineage, SANDBOX_MOUNTS } from "./attempt-lineage.js";
import { collectArtifacts } from "./collect-artifacts.js";
import type { AttemptRef, AttemptResult, HostProtocol, LogLine, Placement } from "./host-protocol.js";
import { LineSplitter } from "./line-splitter.js";
import type { LineageStore } from "./lineage-store.js";
import { materializeSource } from "./materialize-source.js";

export interface AttemptRunnerDeps {
  readonly hostId: string;
  readonly protocol: HostProtocol;
  readonly executor: Executor;
  /** Resolves an admitted toolchain, or throws an Error whose message names the admitted ones. */
  readonly resolveToolchain: (name: string) => Promise<AdmittedToolchain>;
  readonly newObserver: (attempt: number) => OutputObserver;
  /** Where attempt directories are made; each attempt gets its own and it is removed after. */
  readonly workRoot: string;
  /**
   * Where each attempt's workspace and cargo home are made instead, when set: a memory-backed
   * file system (scratch-root.ts). They are small, written once and thrown away, and on a disk
   * every new inode costs (a busy ext4 scans past recently deleted ones for each); the target
   * dir stays under the work root, beside the lineages it is renamed to and from.
   */
  readonly scratchRoot?: string;
  readonly removeDirectories: (paths: readonly string[]) => Promise<void>;
  /**
   * Takes over the removal of a finished attempt's directory so the attempt can return (and
   * the agent free its vCPUs for the next placement) without waiting on the disk; without it
   * the removal is awaited.
   */
  readonly inBackground?: (work: Promise<void>) => void;
  /** Warm lineages on this host; without it every attempt starts from an empty target dir. */
  readonly lineages?: LineageStore;
  readonly heartbeatSeconds?: number;
  /** Most bytes of raw cargo output retained per attempt. */
  readonly cargoOutputLimit?: number;
}

const LOG_FLUSH_MS = 200;

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

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
export function cargoArgv(placement: Placement, args: readonly string[] = placement.invocation.arguments): string[] {
  return ["cargo", placement.invocation.operation, "--message-format=json-render-diagnostics", ...args];
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
 * toolchain, restores the job's warm lineage (attempt-lineage.ts), runs cargo in the
 * executor (job directories at fixed in-sandbox paths) while streaming logs and renewing the
 * lease, publishes artifacts, saves the lineage back, publishes the raw cargo output,
 * reports, and removes every directory of the attempt. Cancellation arrives through the
 * heartbeat answer.
 */
export async function runAttempt(deps: AttemptRunnerDeps, placement: Placement): Promise<void> {
  const ref: AttemptRef = { jobId: placement.jobId, attempt: placement.attempt, leaseToken: placement.leaseToken };
  const attemptId = `${placement.jobId}-a${placement.attempt}`;
  const base = join(deps.workRoot, attemptId);
  const scratch = deps.scratchRoot === undefined ? base : join(deps.scratchRoot, attemptId);
  const dirs = { workspace: join(scratch, "src"), home: join(scratch, "home") };
  // A fresh target dir, unless the attempt's lineage hands over its warm one (restore below).
  let targetDir = join(base, "target");
  let lineage: AttemptLineage | null = null;
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
      await materializeSource(dirs.workspace, placement.source, (sha256) => deps.protocol.fetchBlob(sha256));
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
    const store = deps.lineages;
    if (store !== undefined) {
      // A lineage is an optimization: if the host cannot restore one, the attempt runs cold.
      const restored = await phases.run(
        "restore",
        () =>
          AttemptLineage.restore(
            store,
            placement,
            { attemptDir: base, workspaceDir: dirs.workspace, attemptId },
            Date.now(),
          ).catch((error: unknown) => {
            system(`kiln: the lineage could not be restored, running cold: ${errorText(error)}`);
            return null;
          }),
        (r) => (r === null ? "failed" : "passed"),
      );
      lineage = restored;
      if (restored !== null) {
        targetDir = restored.targetDir;
        for (const note of restored.notes) system(`kiln: ${note}`);
      }
    }
    // No lineage (none configured, or it could not be restored): an empty target dir.
    if (lineage === null) await mkdir(targetDir, { recursive: true });
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
    const testKey = invocationKey(placement, injectedEnvironment(placement));
    const affected = await planAffectedTests(placement, lineage, dirs.workspace, testKey);
    if (affected.evidence !== null) {
      system(`kiln: affected_tests ${affected.evidence.enabled ? "on" : "off"}: ${affected.evidence.reason}`);
    }
    const step =
      placement.invocation.operation === "test" || placement.invocation.operation === "bench" ? "test" : "build";
    const cargoArguments = affected.arguments;
    // affected_tests found nothing to test: cargo does not run at all (run === null).
    let run: ExecutionResult | null = null;
    if (cargoArguments === null) {
      phases.record(step, new Date(), "skipped");
      system("kiln: cargo did not run: no package's tests are affected by the change since the baseline");
    } else {
      const argv = cargoArgv(placement, cargoArguments);
      system(`kiln: ${argv.join(" ")} (toolchain ${toolchain.name}, network offline)`);
      run = await phases.run(
        step,
        () =>
          deps.executor.run({
            attemptId,
            limits: placement.limits,
            workspaceDir: dirs.workspace,
            targetDir,
            homeDir: dirs.home,
            mounts: SANDBOX_MOUNTS,
            warmTarget: lineage?.warm ?? false,
            toolchain,
            argv,
            workingDirectory: placement.invocation.working_directory ?? ".",
            environment: {
              ...(placement.invocation.environment ?? {}),
              ...injectedEnvironment(placement),
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
    }
    splitters.stdout.end();
    splitters.stderr.end();
    observer.end();
    const summary = observer.summary();
    const passed = run === null || (run.outcome === "exited" && run.exitCode === 0);
    const outcome = run?.outcome === "cancelled" || cancelled ? "cancelled" : passed ? "passed" : "failed";
    if (run !== null) {
      system(
        `kiln: cargo ${run.outcome === "exited" ? `exited with ${run.exitCode ?? run.signal}` : `ended: ${run.outcome}`} after ${((run.finishedAt.getTime() - run.startedAt.getTime()) / 1000).toFixed(1)} s`,
      );
      for (const note of run.detail) system(`kiln: ${note}`);
    }
    const artifacts =
      passed && run !== null
        ? await phases.run("publish", async () => {
            const published = [];
            for (const file of await collectArtifacts(targetDir, placement.invocation.artifacts ?? [])) {
              const stored = await deps.protocol.putBlob(await file.read());
              published.push({ path: file.path, bytes: stored.bytes, sha256: stored.sha256 });
            }
            return published;
          })
        : [];
    // Before finish: the next job of the lineage may be claimed the moment this one is terminal.
    const saving = lineage;
    if (saving !== null) {
      // A passing run that tested every package a plain `cargo test` tests (given what the
      // baseline vouches for) is the next affected_tests baseline; otherwise the old one stays.
      if (run !== null && outcome === "passed" && affected.coversEverything) {
        saving.nextTestBaseline = {
          sources: Object.fromEntries(placement.source.map((entry) => [entry.path, entry.sha256])),
          job: placement.jobId,
          invocation: testKey,
        };
      }
      // Nothing ran, so nothing of the slot changed: it is checked back in as it was.
      const ended = run?.outcome ?? "exited";
      system(`kiln: ${await phases.run("save", () => saving.save(ended, new Date()))}`);
    }
    const cargoOutput = await deps.protocol.putBlob(Buffer.concat(output));
    await logs.flush();
    await finish(deps, ref, logs, {
      outcome,
      exitCode: run?.exitCode ?? null,
      failure:
        outcome === "passed"
          ? null
          : outcome === "cancelled"
            ? { phase: step, cause: "cancelled", detail: "cancelled; the process tree was reaped" }
            : run === null
              ? { phase: step, cause: "infrastructure", detail: "cancelled before cargo ran" }
              : failureOf(placement, run, summary),
      report: {
        phases: phases.phases,
        crates: summary.crates,
        tests: summary.tests,
        ...(lineage === null ? {} : { caches: [lineage.cacheItem()] }),
        injections: injectionItems(placement),
        ...(affected.evidence === null ? {} : { affected_tests: affected.evidence }),
        // No unit ran when affected_tests left nothing to test.
        unit:
          run === null
            ? null
            : {
                id: attemptId,
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
    await lineage?.abandon(new Date()).catch(() => undefined);
    // The sandbox is gone and the outcome reported; what is left is disk work (the workspace,
    // and any lineage slot dropped into the attempt), which the next job need not wait for.
    const removal = deps.removeDirectories(scratch === base ? [base] : [base, scratch]).catch(() => undefined);
    if (deps.inBackground !== undefined) deps.inBackground(removal);
    else await removal;
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

/** The environment of the injections admission applied (a not-applied one sets nothing). */
function injectedEnvironment(placement: Placement): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const injection of placement.injections ?? []) {
    if (injection.status === "applied" && injection.environment !== null) {
      environment[injection.environment.name] = injection.environment.value;
    }
  }
  return environment;
}

/** Evidence `injections`: every decision, as admitted. */
function injectionItems(placement: Placement) {
  return (placement.injections ?? []).map(({ setting, value, origin, status, detail }) => ({
    setting,
    value,
    origin,
    status,
    detail,
  }));
}
