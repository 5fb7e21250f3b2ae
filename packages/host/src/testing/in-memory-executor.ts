import type { Clock } from "@kiln/contract";
import type { ExecutionRequest, ExecutionResult, Executor } from "../executor/executor.js";

/** What one scripted run does, in order: write output, then wait, end or fail. */
export interface ScriptedRun {
  /** Lines written to stdout (each ends in a newline). */
  readonly stdout?: readonly string[];
  readonly stderr?: readonly string[];
  /** Milliseconds on the executor's clock before the run ends by itself; default 0. */
  readonly runsForMs?: number;
  /** How it ends when nothing stops it first; default exits 0. */
  readonly ends?:
    | { readonly kind: "exit"; readonly code: number }
    | { readonly kind: "infrastructure"; readonly detail: string }
    | { readonly kind: "throw"; readonly error: Error }
    /** Runs until its signal aborts (a cancellation, a lost lease). */
    | { readonly kind: "hang" };
}

/**
 * An executor that runs no process: each request plays the next scripted run (or `fallback`)
 * on the given clock, so the host agent's handling of leases, cancellation, failures and
 * reports is tested in milliseconds and without bubblewrap. The sandbox executor has its own
 * suite (executor-suite.ts); this one only stands in for it behind the same interface.
 */
export class InMemoryExecutor implements Executor {
  readonly isolation = "sandbox" as const;
  /** Every request received, in order. */
  readonly requests: ExecutionRequest[] = [];
  readonly #scripts: ScriptedRun[];

  constructor(
    private readonly clock: Clock,
    scripts: readonly ScriptedRun[] = [],
    private readonly fallback: ScriptedRun = {},
  ) {
    this.#scripts = [...scripts];
  }

  /** Queues a run for the next request. */
  script(run: ScriptedRun): void {
    this.#scripts.push(run);
  }

  async run(request: ExecutionRequest): Promise<ExecutionResult> {
    this.requests.push(request);
    const script = this.#scripts.shift() ?? this.fallback;
    const startedAt = this.clock.now();
    for (const line of script.stdout ?? []) request.onOutput("stdout", Buffer.from(`${line}\n`));
    for (const line of script.stderr ?? []) request.onOutput("stderr", Buffer.from(`${line}\n`));
    const ends = script.ends ?? { kind: "exit", code: 0 };
    if (ends.kind === "throw") throw ends.error;
    const result = (outcome: ExecutionResult["outcome"], exitCode: number | null, detail: string[] = []) => ({
      outcome,
      exitCode,
      signal: null,
      oomKilled: false,
      diskQuotaExceeded: false,
      diskBytes: null,
      diskUsedBytes: null,
      startedAt,
      finishedAt: this.clock.now(),
      cpuSeconds: 0,
      peakMemoryBytes: 0,
      isolation: this.isolation,
      detail,
    });
    try {
      if (ends.kind === "hang") await new Promise<never>((_, reject) => abortable(request.signal, reject));
      else if ((script.runsForMs ?? 0) > 0) await this.clock.sleep(script.runsForMs ?? 0, request.signal);
      else if (request.signal.aborted) throw request.signal.reason;
    } catch {
      return result("cancelled", null, ["the run was aborted"]);
    }
    if (ends.kind === "infrastructure") return result("infrastructure", null, [ends.detail]);
    return result("exited", ends.kind === "exit" ? ends.code : 0);
  }
}

function abortable(signal: AbortSignal, reject: (reason: unknown) => void): void {
  if (signal.aborted) reject(signal.reason);
  else signal.addEventListener("abort", () => reject(signal.reason), { once: true });
}
