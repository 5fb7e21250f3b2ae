/**
 * Reads the output of a Cargo command run with `--message-format=json-render-diagnostics`
 * (build, check, test, clippy, doc, bench) as it streams, and says what Cargo built and which
 * tests ran with which outcome.
 *
 * Input: stdout carries Cargo's JSON messages (`{"reason":…}`) then, for test and bench, the
 * libtest output of each test binary; stderr carries Cargo's progress lines, one `Running …`
 * or `Doc-tests …` line per test binary, test failures and the rendered rustc diagnostics.
 *
 * Ordering assumption: lines are pushed in order *within* each stream; how the two streams
 * interleave is irrelevant (they are separate pipes, so a reader's view of their relative order
 * is approximate, and a retained log may be replayed one stream after the other). Every result
 * is computed from each stream's own order (see align-test-runs.ts for how test blocks on stdout
 * are paired with the binaries announced on stderr). The only cross-stream quantity is the
 * optional crate build duration, measured from the `Compiling` line's arrival to the last
 * artifact's arrival when the caller passes arrival times.
 *
 * `result()` may be called at any time (e.g. while a job runs) and does not disturb parsing;
 * call `end()` once both streams are closed so unfinished blocks count as crashed and runs
 * without output as binaries without the libtest harness.
 */

import {
  type BuildScriptRun,
  buildPackages,
  type CargoUnit,
  type PackageBuild,
  type TimedUnit,
  toBuildScript,
  toUnit,
} from "./build-units.js";
import { looksLikeCargoMessage, parseCargoMessage } from "./cargo-messages.js";
import { basename, CargoStderrReader, type FailedUnit } from "./cargo-stderr.js";
import type { CompilerError } from "./compiler-diagnostics.js";
import { LibtestReader, type LibtestReaderOptions } from "./libtest-output.js";
import { assembleTests, type ParsedTest, type TestBinary, type TestTotals, testTotals } from "./test-binaries.js";

export type CargoStream = "stdout" | "stderr";

export interface BuildSummary {
  /** Cargo's `build-finished` message was seen. */
  readonly finished: boolean;
  /** `build-finished.success`; null until seen. */
  readonly success: boolean | null;
  /** The `Finished …` progress line, e.g. "`test` profile [unoptimized + debuginfo] target(s) in 0.95s". */
  readonly finishedLine: string | null;
  /** Distinct rustc errors: `compiler-message`s of level error plus diagnostics Cargo rendered on stderr. */
  readonly compilerErrors: number;
  readonly compilerWarnings: number;
  /** `error: could not compile `x` (lib test) due to N previous errors` and build-script failures. */
  readonly failedUnits: readonly FailedUnit[];
  /** The first rustc errors as Cargo rendered them, with their primary locations. */
  readonly firstErrors: readonly CompilerError[];
}

export interface ParsedCargoOutput {
  /** Every unit from `compiler-artifact`, in order. */
  readonly units: readonly CargoUnit[];
  readonly buildScripts: readonly BuildScriptRun[];
  /** Units grouped by package, in first-seen order. */
  readonly packages: readonly PackageBuild[];
  readonly build: BuildSummary;
  readonly testBinaries: readonly TestBinary[];
  /** Every test of every binary, in binary order. */
  readonly tests: readonly ParsedTest[];
  readonly testTotals: TestTotals;
  /** From `error: N targets failed:` (`--no-fail-fast`), or else the rerun selectors of failed binaries. */
  readonly failedTargets: readonly string[];
  readonly stdoutEnded: boolean;
  readonly stderrEnded: boolean;
}

export type CargoOutputParserOptions = LibtestReaderOptions;

const ESCAPE = String.fromCharCode(27);
const ANSI = new RegExp(`${ESCAPE}\\[[0-9;?]*[A-Za-z]`, "g");

interface CompilerDiagnostic {
  readonly level: string;
  readonly key: string;
}

export class CargoOutputParser {
  readonly #libtest: LibtestReader;
  readonly #stderr = new CargoStderrReader();
  readonly #units: TimedUnit[] = [];
  readonly #buildScripts: BuildScriptRun[] = [];
  readonly #diagnostics: CompilerDiagnostic[] = [];
  #buildSuccess: boolean | null = null;
  readonly #partial: Record<CargoStream, string> = { stdout: "", stderr: "" };
  readonly #ended: Record<CargoStream, boolean> = { stdout: false, stderr: false };
  /** Test binaries (by file name) kiln's test runner saw fail before its retries made cargo see them pass. */
  readonly #failedFirstRun = new Set<string>();

  constructor(options: CargoOutputParserOptions = {}) {
    this.#libtest = new LibtestReader(options);
  }

  /** One complete line (without its newline) of one stream; `atMs` is its arrival time, if known. */
  pushLine(stream: CargoStream, line: string, atMs?: number): void {
    const clean = line.endsWith("\r") ? line.slice(0, -1) : line;
    const text = clean.includes(ESCAPE) ? clean.replace(ANSI, "") : clean;
    if (stream === "stderr") {
      this.#stderr.pushLine(text, atMs ?? null);
      return;
    }
    if (!this.#libtest.inBlock && looksLikeCargoMessage(text)) {
      const message = parseCargoMessage(text);
      if (message) {
        this.#message(message, atMs ?? null);
        return;
      }
    }
    this.#libtest.pushLine(text);
  }

  /** A chunk of one stream as it arrives; a trailing partial line waits for the rest. */
  pushText(stream: CargoStream, chunk: string, atMs?: number): void {
    const text = this.#partial[stream] + chunk;
    const lines = text.split("\n");
    this.#partial[stream] = lines.pop() ?? "";
    for (const line of lines) this.pushLine(stream, line, atMs);
  }

  /**
   * Cargo was stopped from outside (the job cancelled, its wall-clock ceiling reached), not ended
   * on its own: the test binary running then is `interrupted`, never `crashed`, and the tests it
   * had reported stay attributed to it. Call before `end()`.
   */
  stoppedFromOutside(): void {
    this.#stderr.stopped();
  }

  /** The stream (both when omitted) is closed: flushes a partial line and makes the result final. */
  end(stream?: CargoStream, atMs?: number): void {
    for (const s of stream ? [stream] : (["stdout", "stderr"] as const)) {
      if (this.#ended[s]) continue;
      if (this.#partial[s] !== "") {
        const rest = this.#partial[s];
        this.#partial[s] = "";
        this.pushLine(s, rest, atMs);
      }
      this.#ended[s] = true;
      if (s === "stdout") this.#libtest.finish();
      else this.#stderr.finish();
    }
  }

  #message(message: NonNullable<ReturnType<typeof parseCargoMessage>>, atMs: number | null): void {
    switch (message.reason) {
      case "compiler-artifact":
        this.#units.push({ unit: toUnit(message), atMs });
        return;
      case "build-script-executed":
        this.#buildScripts.push(toBuildScript(message));
        return;
      case "compiler-message":
        if (message.level.startsWith("error") || message.level === "warning") {
          this.#diagnostics.push({
            level: message.level.startsWith("error") ? "error" : "warning",
            key: message.rendered ?? `${message.code ?? ""} ${message.message}`,
          });
        }
        return;
      case "build-finished":
        this.#buildSuccess = message.success;
        return;
      default:
        return;
    }
  }

  /**
   * kiln's test runner (agent/attempt/test-runner.ts) reports how a test binary's own run
   * exited: one that failed is a failed run here even when its retries made cargo see it pass.
   */
  testBinaryExited(executable: string, exitCode: number): void {
    if (exitCode !== 0) this.#failedFirstRun.add(basename(executable));
  }

  /** Everything parsed so far. */
  result(): ParsedCargoOutput {
    const snapshot = this.#stderr.snapshot();
    const stderr =
      this.#failedFirstRun.size === 0
        ? snapshot
        : {
            ...snapshot,
            runs: snapshot.runs.map((r) =>
              r.executable !== null && this.#failedFirstRun.has(basename(r.executable)) ? { ...r, failed: true } : r,
            ),
          };
    const stdout = this.#libtest.snapshot();
    const units = this.#units.map((u) => u.unit);
    const build = {
      ...this.#buildSummary(stderr.finishedLine, stderr.renderedErrors, stderr.renderedWarnings, [
        ...stderr.failedUnits,
      ]),
      firstErrors: stderr.compilerErrors,
    };
    const packages = buildPackages(this.#units, stderr.compiling, stderr.failedUnits);
    const { binaries, tests } = assembleTests(
      units,
      stderr.runs,
      stdout.blocks,
      stdout.looseTextAfter,
      this.#ended.stdout,
    );
    const failedTargets =
      stderr.failedTargets.length > 0
        ? [...stderr.failedTargets]
        : stderr.runs.filter((r) => r.failed && r.rerunArgs !== null).map((r) => r.rerunArgs ?? "");
    return {
      units,
      buildScripts: [...this.#buildScripts],
      packages,
      build,
      testBinaries: binaries,
      tests,
      testTotals: testTotals(binaries, stdout.blocks, tests),
      failedTargets,
      stdoutEnded: this.#ended.stdout,
      stderrEnded: this.#ended.stderr,
    };
  }

  #buildSummary(
    finishedLine: string | null,
    renderedErrors: number,
    renderedWarnings: number,
    failedUnits: FailedUnit[],
  ): Omit<BuildSummary, "firstErrors"> {
    const distinct = (level: string) =>
      new Set(this.#diagnostics.filter((d) => d.level === level).map((d) => d.key)).size;
    let errors = distinct("error") + renderedErrors;
    if (errors === 0) {
      // A unit failed without a diagnostic we recognised (e.g. a linker error): use Cargo's own count.
      for (const unit of failedUnits) errors = Math.max(errors, unit.errors ?? 1);
    }
    return {
      finished: this.#buildSuccess !== null,
      success: this.#buildSuccess,
      finishedLine,
      compilerErrors: errors,
      compilerWarnings: distinct("warning") + renderedWarnings,
      failedUnits,
    };
  }
}

/** Parses complete captured output (both streams ended). */
export function parseCargoOutput(
  stdout: string,
  stderr: string,
  options?: CargoOutputParserOptions,
): ParsedCargoOutput {
  const parser = new CargoOutputParser(options);
  parser.pushText("stdout", stdout);
  parser.pushText("stderr", stderr);
  parser.end();
  return parser.result();
}
