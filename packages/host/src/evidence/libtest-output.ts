/**
 * The plain-text output libtest (and rustdoc's doctest runner, which uses libtest) prints on
 * stdout, read line by line. Each test binary execution prints one *block*:
 *
 *     running 5 tests
 *     test tests::passes ... ok
 *     test tests::ignored_reason ... ignored, slow
 *     test tests::should_panic_ok - should panic ... ok
 *     test tests::fails ... FAILED
 *     test benches::sum ... bench:          12.30 ns/iter (+/- 0.40)
 *
 *     failures:
 *
 *     ---- tests::fails stdout ----
 *     …captured output and panic message…
 *
 *     failures:
 *         tests::fails
 *
 *     test result: FAILED. 2 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.09s
 *
 * Merged doctests (edition 2024) print two blocks for one `Doc-tests` run (merged ones, then
 * standalone ones such as `compile_fail`) followed by `all doctests ran in …` once. A binary that
 * crashes (abort, signal) leaves its block without a `test result` line. Anything printed on
 * stdout outside a block comes from a test binary without the libtest harness (`harness = false`,
 * e.g. criterion) and is remembered as *loose text* in the gap between blocks.
 */

import { type PanicMessage, PanicReader } from "./panic-messages.js";

export type LibtestOutcome = "passed" | "failed" | "ignored" | "bench";

export interface BenchResult {
  readonly nsPerIter: number;
  /** The `+/-` spread in ns. */
  readonly deviationNs: number;
  readonly mbPerSecond: number | null;
}

export interface LibtestCase {
  /** The test path as libtest prints it, without a mode suffix (e.g. `tests::fails`, `src/lib.rs - add (line 5)`). */
  readonly name: string;
  readonly outcome: LibtestOutcome;
  /** libtest's mode suffix: `should panic`, `compile fail` or `compile` (doctest `no_run`); null for none. */
  readonly mode: string | null;
  /** `#[ignore = "reason"]` text. */
  readonly ignoreReason: string | null;
  /** Only with `-Zunstable-options --report-time` (`ok <0.003s>`). */
  readonly durationMs: number | null;
  readonly bench: BenchResult | null;
  /** The test's `---- name stdout ----` section from the failures listing, bounded; null when none. */
  readonly failureOutput: string | null;
  readonly failureOutputTruncated: boolean;
  /**
   * The panic in that section (read whole however long the output before it: the bound above
   * keeps the section's start), preferring one on the test's own thread; null when none.
   */
  readonly panic: PanicMessage | null;
}

export interface LibtestSummary {
  readonly ok: boolean;
  readonly passed: number;
  readonly failed: number;
  readonly ignored: number;
  readonly measured: number;
  readonly filteredOut: number;
  readonly finishedInMs: number | null;
}

/**
 * ok/failed: ended with `test result: ok|FAILED`; aborted: no `test result` although a later
 * block started or stdout ended (the binary crashed); open: still running.
 */
export type LibtestBlockStatus = "ok" | "failed" | "aborted" | "open";

export interface LibtestBlock {
  readonly index: number;
  /** N of `running N tests`. */
  readonly declaredTests: number;
  readonly status: LibtestBlockStatus;
  readonly cases: readonly LibtestCase[];
  readonly summary: LibtestSummary | null;
  /** `cargo test -q` (terse format): only failed tests are named. */
  readonly terse: boolean;
  /** Names listed under the final `failures:` heading. */
  readonly failureList: readonly string[];
  /** True when the test names are doctest names (`file - item (line N)`); false when they are not; null when unknown (no tests). */
  readonly doctestNames: boolean | null;
  /** Followed by rustdoc's `all doctests ran in …` line: the last block of a merged doctest run. */
  readonly endsDoctestRun: boolean;
  /** Stdout text outside any block was seen between the previous block and this one. */
  readonly looseTextBefore: boolean;
}

export interface LibtestSnapshot {
  readonly blocks: readonly LibtestBlock[];
  /** Loose text after the last block. */
  readonly looseTextAfter: boolean;
}

const RUNNING = /^running (\d+) tests?$/;
const RESULT =
  /^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured; (\d+) filtered out(?:; finished in ([\d.]+)s)?/;
const SLOW = /^test .+ has been running for over \d+ seconds$/;
const TEST_LINE = /^test (.+?) \.\.\.(?: (.*))?$/;
const MODE_SUFFIX = / - (should panic|compile fail|compile)$/;
const TIME_SUFFIX = / <([\d.]+)s>$/;
const BENCH = /^bench:\s+([\d,.]+) ns\/iter \(\+\/- ([\d,.]+)\)(?: = ([\d,.]+) MB\/s)?/;
const SECTION_OUTPUT = /^---- (.+) (stdout|stderr) ----$/;
const TERSE_PROGRESS = /^[.iFb]+(?: \d+\/\d+)?$/;
const TERSE_FAILED = /^(.+) --- FAILED$/;
const DOCTEST_TRAILER = /^all doctests ran in [\d.]+s/;
/** rustdoc names a doctest `<file> - <item path> (line N)`. */
const DOCTEST_NAME = / \(line \d+\)$/;

interface MutableCase {
  name: string;
  outcome: LibtestOutcome | null;
  mode: string | null;
  ignoreReason: string | null;
  durationMs: number | null;
  bench: BenchResult | null;
}

interface Capture {
  text: string;
  bytes: number;
  truncated: boolean;
}

interface MutableBlock {
  index: number;
  declaredTests: number;
  cases: MutableCase[];
  byName: Map<string, MutableCase>;
  summary: LibtestSummary | null;
  superseded: boolean;
  terse: boolean;
  failureList: string[];
  outputs: Map<string, Capture>;
  endsDoctestRun: boolean;
  looseTextBefore: boolean;
  /** Where in the block's layout the reader is. */
  section: "results" | "failures" | "successes";
  /** The test whose `---- name stdout ----` output is being captured (failures section only). */
  capturing: string | null;
  /** Reads the panic messages of the section being captured. */
  panicReader: PanicReader | null;
  /** Per failed test, the panic of its section. */
  panics: Map<string, PanicMessage>;
}

export interface LibtestReaderOptions {
  /** Bound on the captured failure output kept per failed test (UTF-16 code units ≈ bytes for ASCII). Default 4096. */
  readonly maxFailureOutputBytes?: number;
}

export class LibtestReader {
  readonly #maxOutput: number;
  readonly #blocks: MutableBlock[] = [];
  #current: MutableBlock | null = null;
  #looseText = false;
  #finished = false;

  constructor(options: LibtestReaderOptions = {}) {
    this.#maxOutput = options.maxFailureOutputBytes ?? 4096;
  }

  /** True while a block is open (its lines are test output, never Cargo JSON). */
  get inBlock(): boolean {
    return this.#current !== null;
  }

  /** Marks stdout complete: an unterminated block is then a crashed binary. */
  finish(): void {
    this.#finished = true;
    if (this.#current !== null) this.#endCapture(this.#current);
  }

  pushLine(line: string): void {
    const running = RUNNING.exec(line);
    if (running) {
      if (this.#current) {
        this.#current.superseded = true;
        this.#endCapture(this.#current);
      }
      const block: MutableBlock = {
        index: this.#blocks.length,
        declaredTests: Number(running[1]),
        cases: [],
        byName: new Map(),
        summary: null,
        superseded: false,
        terse: false,
        failureList: [],
        outputs: new Map(),
        endsDoctestRun: false,
        looseTextBefore: this.#looseText,
        section: "results",
        capturing: null,
        panicReader: null,
        panics: new Map(),
      };
      this.#looseText = false;
      this.#blocks.push(block);
      this.#current = block;
      return;
    }
    const block = this.#current;
    if (!block) {
      if (DOCTEST_TRAILER.test(line)) {
        const last = this.#blocks[this.#blocks.length - 1];
        if (last) last.endsDoctestRun = true;
      } else if (line.trim() !== "") {
        this.#looseText = true;
      }
      return;
    }
    const result = RESULT.exec(line);
    if (result) {
      block.summary = {
        ok: result[1] === "ok",
        passed: Number(result[2]),
        failed: Number(result[3]),
        ignored: Number(result[4]),
        measured: Number(result[5]),
        filteredOut: Number(result[6]),
        finishedInMs: result[7] === undefined ? null : Math.round(Number(result[7]) * 1000),
      };
      this.#endCapture(block);
      this.#current = null;
      return;
    }
    if (line === "failures:" || line === "successes:") {
      this.#endCapture(block);
      block.section = line === "failures:" ? "failures" : "successes";
      return;
    }
    if (block.section !== "results") {
      this.#sectionLine(block, line);
      return;
    }
    if (SLOW.test(line)) return;
    const test = TEST_LINE.exec(line);
    if (test) {
      this.#testLine(block, test[1] ?? "", (test[2] ?? "").trim());
      return;
    }
    if (TERSE_PROGRESS.test(line)) {
      block.terse = true;
      return;
    }
    const terseFailed = TERSE_FAILED.exec(line);
    if (terseFailed) {
      block.terse = true;
      this.#addCase(block, splitMode(terseFailed[1] ?? ""), "failed");
    }
    // Anything else inside a block is test output printed with --nocapture.
  }

  #testLine(block: MutableBlock, rawName: string, rest: string): void {
    const named = splitMode(rawName);
    let durationMs: number | null = null;
    let text = rest;
    const time = TIME_SUFFIX.exec(text);
    if (time) {
      durationMs = Math.round(Number(time[1]) * 1000);
      text = text.slice(0, time.index);
    }
    if (text === "ok") {
      this.#addCase(block, named, "passed", { durationMs });
    } else if (text === "FAILED" || text.startsWith("FAILED ")) {
      this.#addCase(block, named, "failed", { durationMs });
    } else if (text === "ignored" || text.startsWith("ignored, ")) {
      const reason = text === "ignored" ? null : text.slice("ignored, ".length);
      this.#addCase(block, named, "ignored", { ignoreReason: reason });
    } else {
      const bench = BENCH.exec(text);
      if (bench) {
        this.#addCase(block, named, "bench", {
          bench: {
            nsPerIter: parseNumber(bench[1]),
            deviationNs: parseNumber(bench[2]),
            mbPerSecond: bench[3] === undefined ? null : parseNumber(bench[3]),
          },
        });
      } else {
        // `test x ... ` then the test's own --nocapture output (single-threaded runs print the
        // name before running). The outcome is settled by the failures listing at the end.
        this.#addCase(block, named, null);
      }
    }
  }

  #addCase(
    block: MutableBlock,
    named: { name: string; mode: string | null },
    outcome: LibtestOutcome | null,
    extra: { durationMs?: number | null; ignoreReason?: string | null; bench?: BenchResult } = {},
  ): void {
    const existing = block.byName.get(named.name);
    if (existing) {
      if (outcome !== null) existing.outcome = outcome;
      return;
    }
    const item: MutableCase = {
      name: named.name,
      outcome,
      mode: named.mode,
      ignoreReason: extra.ignoreReason ?? null,
      durationMs: extra.durationMs ?? null,
      bench: extra.bench ?? null,
    };
    block.cases.push(item);
    block.byName.set(named.name, item);
  }

  #sectionLine(block: MutableBlock, line: string): void {
    const header = SECTION_OUTPUT.exec(line);
    if (header) {
      const name = splitMode(header[1] ?? "").name;
      this.#endCapture(block);
      block.capturing = block.section === "failures" ? name : null;
      // In the successes section (--show-output) output is not kept; mark as capturing nothing.
      if (block.section === "successes") block.capturing = "";
      if (block.capturing !== null && block.capturing !== "") {
        const test = block.capturing;
        block.panicReader = new PanicReader((panic) => {
          const kept = block.panics.get(test);
          if (kept === undefined || (kept.thread !== test && panic.thread === test)) block.panics.set(test, panic);
        });
      }
      return;
    }
    if (block.capturing !== null) {
      if (block.capturing === "") return;
      block.panicReader?.push(line);
      this.#capture(block, block.capturing, line);
      return;
    }
    if (block.section === "failures" && line.startsWith("    ")) {
      block.failureList.push(splitMode(line.slice(4)).name);
    }
  }

  #endCapture(block: MutableBlock): void {
    block.panicReader?.end();
    block.panicReader = null;
    block.capturing = null;
  }

  #capture(block: MutableBlock, name: string, line: string): void {
    let capture = block.outputs.get(name);
    if (!capture) {
      capture = { text: "", bytes: 0, truncated: false };
      block.outputs.set(name, capture);
    }
    if (capture.truncated) return;
    const piece = `${line}\n`;
    const room = this.#maxOutput - capture.bytes;
    if (piece.length > room) {
      capture.text += piece.slice(0, Math.max(0, room));
      capture.bytes = this.#maxOutput;
      capture.truncated = true;
      return;
    }
    capture.text += piece;
    capture.bytes += piece.length;
  }

  /** An immutable view of everything read so far (does not change the reader). */
  snapshot(): LibtestSnapshot {
    const blocks = this.#blocks.map((b) => this.#freeze(b));
    return { blocks, looseTextAfter: this.#looseText };
  }

  #freeze(block: MutableBlock): LibtestBlock {
    let status: LibtestBlockStatus;
    if (block.summary) status = block.summary.ok ? "ok" : "failed";
    else if (block.superseded || this.#finished) status = "aborted";
    else status = "open";
    const listed = new Set(block.failureList);
    const cases: LibtestCase[] = [];
    const seen = new Set<string>();
    const withOutput = (
      name: string,
      outcome: LibtestOutcome,
      base: Omit<LibtestCase, "outcome" | "failureOutput" | "failureOutputTruncated" | "panic">,
    ): LibtestCase => {
      const capture = outcome === "failed" ? block.outputs.get(name) : undefined;
      const text = capture ? capture.text.replace(/^\n+/, "").replace(/\n+$/, "") : "";
      return {
        ...base,
        outcome,
        failureOutput: capture && text !== "" ? text : null,
        failureOutputTruncated: capture?.truncated ?? false,
        panic: outcome === "failed" ? (block.panics.get(name) ?? null) : null,
      };
    };
    for (const c of block.cases) {
      seen.add(c.name);
      let outcome = c.outcome;
      if (outcome === null) {
        // The name was printed before the test ran (--nocapture, one thread).
        if (listed.has(c.name) || status === "aborted") outcome = "failed";
        else if (status === "open") continue;
        else outcome = "passed";
      }
      cases.push(
        withOutput(c.name, outcome, {
          name: c.name,
          mode: c.mode,
          ignoreReason: c.ignoreReason,
          durationMs: c.durationMs,
          bench: c.bench,
        }),
      );
    }
    // Terse output names only failures; so does a listing whose result lines were garbled.
    for (const name of block.failureList) {
      if (seen.has(name)) continue;
      seen.add(name);
      cases.push(withOutput(name, "failed", { name, mode: null, ignoreReason: null, durationMs: null, bench: null }));
    }
    let doctestNames: boolean | null = null;
    for (const c of cases) {
      const isDoc = DOCTEST_NAME.test(c.name);
      doctestNames = doctestNames === null ? isDoc : doctestNames || isDoc;
    }
    if (block.endsDoctestRun) doctestNames = true;
    return {
      index: block.index,
      declaredTests: block.declaredTests,
      status,
      cases,
      summary: block.summary,
      terse: block.terse,
      failureList: [...block.failureList],
      doctestNames,
      endsDoctestRun: block.endsDoctestRun,
      looseTextBefore: block.looseTextBefore,
    };
  }
}

function splitMode(raw: string): { name: string; mode: string | null } {
  const mode = MODE_SUFFIX.exec(raw);
  if (!mode) return { name: raw, mode: null };
  return { name: raw.slice(0, mode.index), mode: mode[1] ?? null };
}

function parseNumber(text: string | undefined): number {
  return Number((text ?? "").replace(/,/g, ""));
}
