import {
  type FlakyPolicy,
  type RetriesItem,
  TEST_TRY_OUTPUT_LIMIT,
  type TestBinaryItem,
  type TestItem,
  type TestTryItem,
} from "@kiln/contract";
import type { OutputSummary } from "../attempt-evidence.js";

/** One test binary as kiln's test runner saw it run (test-runner.ts). */
interface BinaryRun {
  readonly executable: string;
  readonly startNs: bigint;
  endNs: bigint | null;
  /** How the binary's own run exited (before any re-run); null until it ended. */
  exitCode: number | null;
}

/** One re-run of a failed test. */
interface TestTry {
  readonly executable: string;
  readonly test: string;
  readonly try: number;
  readonly startNs: bigint;
  endNs: bigint | null;
  passed: boolean;
  readonly output: OutputTail;
  logSequence: number | null;
}

/**
 * The tail of a re-run's output, at most `limit` characters (UTF-16 code units, ≈ bytes for
 * ASCII) whatever the number of lines: lines past the limit are dropped from the front by an
 * index (never Array.shift, which copies the whole array each time), and the tail says it was cut.
 */
export class OutputTail {
  #lines: string[] = [];
  #first = 0;
  #size = 0;
  #truncated = false;

  push(line: string, limit: number): void {
    const kept = line.length + 1 > limit ? line.slice(line.length + 1 - limit) : line;
    if (kept !== line) this.#truncated = true;
    this.#lines.push(kept);
    this.#size += kept.length + 1;
    while (this.#size > limit && this.#first < this.#lines.length) {
      this.#size -= (this.#lines[this.#first] ?? "").length + 1;
      this.#first += 1;
      this.#truncated = true;
    }
    // Compacts now and then, so the dropped lines' memory goes: what is held stays about 2× the tail.
    if (this.#first > 64 && this.#first * 2 > this.#lines.length) {
      this.#lines = this.#lines.slice(this.#first);
      this.#first = 0;
    }
  }

  /** Characters kept (each line with its newline). */
  get size(): number {
    return this.#size;
  }

  /** Lines held, kept or not yet compacted away. */
  get held(): number {
    return this.#lines.length;
  }

  get truncated(): boolean {
    return this.#truncated;
  }

  text(): string {
    return this.#lines.slice(this.#first).join("\n");
  }
}

/** Most bytes of re-run output kept across all of an attempt's tries (each keeps its tail). */
const TRIES_OUTPUT_TOTAL = 4 * 2 ** 20;

const MARKER = /^\{"reason":"kiln-test-(binary-start|binary-end|try-start|try-end)",/;

const nanoseconds = (value: unknown): bigint => BigInt(String(value));
const baseName = (path: string): string => path.slice(path.lastIndexOf("/") + 1);
const msBetween = (start: bigint, end: bigint | null): number =>
  end === null || end < start ? 0 : Number((end - start) / 1_000_000n);

/**
 * Reads the test runner's markers from cargo's stdout as it streams: each binary's start and
 * end, and each re-run of a failed test with the output it printed (whose lines go to the log
 * but not to cargo's output parser: a re-run is not a test binary cargo ran).
 */
export class TestRunMarkers {
  readonly #binaries: BinaryRun[] = [];
  readonly #tries: TestTry[] = [];
  #open: TestTry | null = null;
  /** Bytes the closed tries kept. */
  #kept = 0;

  /** `onBinaryExit`: how each binary's own run exited, as the runner saw it (before any retry). */
  constructor(private readonly onBinaryExit: (executable: string, exitCode: number) => void = () => {}) {}

  /** A stdout line: true when it is one of the runner's markers (kept out of the log and the parser). */
  marker(line: string): boolean {
    const kind = MARKER.exec(line)?.[1];
    if (kind === undefined) return false;
    let value: Record<string, unknown>;
    let at: bigint;
    try {
      value = JSON.parse(line) as Record<string, unknown>;
      at = nanoseconds(value.at_ns);
    } catch {
      // Not the runner's (a test printed something like it): an ordinary output line.
      return false;
    }
    const executable = String(value.executable);
    switch (kind) {
      case "binary-start":
        this.#binaries.push({ executable, startNs: at, endNs: null, exitCode: null });
        break;
      case "binary-end": {
        const run = this.#binaries.findLast((b) => b.executable === executable && b.endNs === null);
        if (run !== undefined) {
          run.endNs = at;
          run.exitCode = Number(value.exit);
        }
        this.onBinaryExit(executable, Number(value.exit));
        break;
      }
      case "try-start":
        this.#open = {
          executable,
          test: String(value.test),
          try: Number(value.try),
          startNs: at,
          endNs: null,
          passed: false,
          output: new OutputTail(),
          logSequence: null,
        };
        this.#tries.push(this.#open);
        break;
      case "try-end":
        if (this.#open !== null) {
          this.#open.endNs = at;
          this.#open.passed = value.passed === true;
          this.#kept += this.#open.output.size;
        }
        this.#open = null;
        break;
    }
    return true;
  }

  /** Whether a re-run is printing now: its lines are its try's output. */
  get inTry(): boolean {
    return this.#open !== null;
  }

  /** A line a re-run printed, and its place in the job's log; the try keeps the tail of its output. */
  tryOutput(line: string, place: number): void {
    const open = this.#open;
    if (open === null) return;
    open.logSequence ??= place;
    open.output.push(line, Math.min(TEST_TRY_OUTPUT_LIMIT, Math.max(0, TRIES_OUTPUT_TOTAL - this.#kept)));
  }

  /**
   * The summary with what the runner measured and re-ran: each re-run test's tries (the run
   * inside cargo test being try 1), a test that passed on a re-run `flaky` and `passed` (under
   * policy `pass` its panic leaves `failures` and the failed count: it is not what failed the
   * job), each binary's wall time, and what the retries did. The verdict itself was decided in
   * the runner (its exit status is what cargo saw).
   */
  apply(
    summary: OutputSummary,
    settings: { readonly retries: number; readonly policy: FlakyPolicy },
  ): { summary: OutputSummary; testBinaries: TestBinaryItem[]; retries: RetriesItem } {
    const labelOf = new Map<string, string>();
    for (const binary of summary.testBinaries ?? []) {
      if (binary.executable !== null) labelOf.set(baseName(binary.executable), binary.label);
    }
    const label = (executable: string) => labelOf.get(baseName(executable)) ?? baseName(executable);
    const triesOf = new Map<string, TestTry[]>();
    for (const t of this.#tries) {
      const key = `${label(t.executable)}\u0000${t.test}`;
      triesOf.set(key, [...(triesOf.get(key) ?? []), t]);
    }
    let flaky = 0;
    let failedEveryTry = 0;
    let rerunMs = 0;
    const flakyKeys = new Set<string>();
    const tests: TestItem[] = summary.tests.map((test) => {
      const key = `${test.target}\u0000${test.name}`;
      const reruns = triesOf.get(key);
      if (test.outcome !== "failed" || reruns === undefined) return test;
      const captured = test as { failure_output?: unknown; failure_output_truncated?: unknown };
      const output = String(captured.failure_output ?? "");
      const first: TestTryItem = {
        try: 1,
        outcome: "failed",
        duration_ms: test.duration_ms ?? 0,
        output: output.slice(Math.max(0, output.length - TEST_TRY_OUTPUT_LIMIT)),
        ...(captured.failure_output_truncated === true || output.length > TEST_TRY_OUTPUT_LIMIT
          ? { output_truncated: true }
          : {}),
      };
      const tries: TestTryItem[] = [
        first,
        ...reruns.map((t) => {
          rerunMs += msBetween(t.startNs, t.endNs);
          return {
            try: t.try,
            outcome: t.passed ? ("passed" as const) : ("failed" as const),
            duration_ms: msBetween(t.startNs, t.endNs),
            output: t.output.text(),
            ...(t.output.truncated ? { output_truncated: true } : {}),
            ...(t.logSequence === null ? {} : { log_sequence: t.logSequence }),
          };
        }),
      ];
      if (reruns.some((t) => t.passed)) {
        flaky += 1;
        flakyKeys.add(key);
        return { ...test, outcome: "passed", flaky: true, tries };
      }
      failedEveryTry += 1;
      return { ...test, tries };
    });
    const passes = settings.policy === "pass";
    const failures = passes
      ? summary.failures.filter((f) => f.kind !== "test_panic" || !flakyKeys.has(`${f.target}\u0000${f.test}`))
      : summary.failures;
    // Under `pass` a flaky test is not a failed one. A binary that failed without a failed or flaky
    // test to show for it (a `harness = false` binary) still counts one.
    const unexplained = this.#binaries.some(
      (b) =>
        b.exitCode !== null &&
        b.exitCode !== 0 &&
        !tests.some((t) => t.target === label(b.executable) && (t.outcome === "failed" || t.flaky === true)),
    );
    const failedTests = passes ? Math.max(summary.failedTests - flaky, unexplained ? 1 : 0) : summary.failedTests;
    const testBinaries = this.#binaries.map((b) => {
      const target = label(b.executable);
      return {
        target,
        duration_ms: msBetween(b.startNs, b.endNs),
        tests: summary.tests.filter((t) => t.target === target).length,
      };
    });
    return {
      summary: { ...summary, tests, failures, failedTests },
      testBinaries,
      retries: {
        flaky_retries: settings.retries,
        flaky_policy: settings.policy,
        reruns: this.#tries.length,
        flaky,
        failed_every_try: failedEveryTry,
        duration_ms: rerunMs,
      },
    };
  }
}
