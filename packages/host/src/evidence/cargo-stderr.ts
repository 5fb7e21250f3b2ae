/**
 * Cargo's human output on stderr, read line by line: progress lines (`Compiling foo v0.1.0
 * (/src/foo)`, `Finished …`), one line per test binary it runs (`Running unittests src/lib.rs
 * (target/debug/deps/foo-0123abcd)`, `Running tests/it.rs (…)`, `Doc-tests foo`; with `-v`:
 * ``Running `/abs/target/debug/deps/foo-0123abcd` ``), the failure of each binary (`error: test
 * failed, to rerun pass `--lib``, `Caused by: process didn't exit successfully: … (signal: 6,
 * SIGABRT…)`), the `--no-fail-fast` summary (`error: 2 targets failed:`), and rustc diagnostics
 * Cargo rendered because of `--message-format=json-render-diagnostics`.
 */

import { CompilerDiagnosticReader, type CompilerError } from "./compiler-diagnostics.js";
import { type PanicMessage, PanicReader } from "./panic-messages.js";

export type StderrRunKind =
  /** `Running unittests <src> (<exe>)`: a lib's or bin's own #[test]s. */
  | "unittests"
  /** `Running <src> (<exe>)`: an integration test, bench or example target. */
  | "target"
  /** ``Running `<exe> …` `` (cargo -v). */
  | "command"
  /** `Doc-tests <crate>`. */
  | "doctests";

export interface StderrRun {
  readonly index: number;
  readonly kind: StderrRunKind;
  /** The target's source file as Cargo prints it (`src/lib.rs`, `tests/it.rs`); null for doctests and `-v`. */
  readonly sourcePath: string | null;
  /** The test executable's path as printed (relative to the working directory, or absolute with `-v`). */
  readonly executable: string | null;
  /** Doctests: the crate (library target) name. */
  readonly crateName: string | null;
  /** `error: test failed, to rerun pass …` followed this run. */
  readonly failed: boolean;
  /** The selector Cargo suggests to rerun it, e.g. `--lib`, `--test it`, `-p core --doc`. */
  readonly rerunArgs: string | null;
  /** e.g. `exit status: 101` or `signal: 6, SIGABRT: process abort signal`. */
  readonly exitDetail: string | null;
  /**
   * Another run followed, or stderr ended: the run's outcome is final. The last run of a cargo
   * stopped from outside (cancelled, the wall-clock ceiling) never completes: it was stopped.
   */
  readonly complete: boolean;
  /** The last run, stderr ended, and cargo was stopped from outside while it ran. */
  readonly interrupted: boolean;
  readonly atMs: number | null;
  /** Panic messages the binary wrote on stderr (`--nocapture`: libtest's capture is off). */
  readonly panics: readonly PanicMessage[];
}

export interface CompilingLine {
  /** `Compiling`, `Checking`, `Documenting` or `Fresh` (-v). */
  readonly verb: string;
  readonly name: string;
  readonly version: string;
  /** The parenthesised source: a path, a git URL with `#rev`, `registry `name``; null for crates.io. */
  readonly source: string | null;
  readonly atMs: number | null;
}

export interface FailedUnit {
  readonly name: string;
  /** e.g. `lib`, `lib test`, `bin "app"`, `build script`; null when Cargo named none. */
  readonly target: string | null;
  readonly errors: number | null;
  readonly version: string | null;
}

export interface StderrSnapshot {
  readonly compiling: readonly CompilingLine[];
  readonly finishedLine: string | null;
  readonly runs: readonly StderrRun[];
  readonly failedUnits: readonly FailedUnit[];
  /** Rendered rustc error diagnostics (distinct: Cargo renders a diagnostic shared by several units once). */
  readonly renderedErrors: number;
  readonly renderedWarnings: number;
  /** Selectors listed by `error: N targets failed:` (`--no-fail-fast`). */
  readonly failedTargets: readonly string[];
  /** The first rustc error diagnostics of the build, as rendered. */
  readonly compilerErrors: readonly CompilerError[];
  readonly ended: boolean;
}

const PROGRESS = /^(Compiling|Checking|Documenting|Fresh) (\S+) v(\S+)(?: \((.*)\))?$/;
const FINISHED = /^Finished (.+)$/;
const DOC_TESTS = /^Doc-tests (\S+)$/;
const VERBOSE_RUNNING = /^Running `(.+)`$/;
const TEST_FAILED = /^error: (?:test|doctest|bench) failed, to rerun pass `(.+)`$/;
const EXIT_DETAIL = /^process didn't exit successfully: `.*` \((.+)\)$/;
const TARGETS_FAILED = /^error: \d+ targets? failed:$/;
const TARGET_ITEM = /^\s+`(.+)`$/;
const COULD_NOT_COMPILE = /^error: could not compile `([^`]+)`(?: \((.*?)\))?(?: due to (\d+) previous errors?)?/;
const BUILD_SCRIPT_FAILED = /^error: failed to run custom build command for `(\S+) v(\S+)(?: \(.*\))?`/;
const DIAGNOSTIC = /^(error|warning)(\[[^\]]+\])?: \S/;
const LOCATION = /^\s*--> /;
const TOOL_PROGRAMS = new Set(["rustc", "rustdoc", "clippy-driver", "sccache", "rustc-wrapper"]);

interface MutableRun {
  index: number;
  kind: StderrRunKind;
  sourcePath: string | null;
  executable: string | null;
  crateName: string | null;
  failed: boolean;
  rerunArgs: string | null;
  exitDetail: string | null;
  atMs: number | null;
  panics: PanicMessage[];
}

export class CargoStderrReader {
  readonly #compiling: CompilingLine[] = [];
  readonly #runs: MutableRun[] = [];
  readonly #failedUnits: FailedUnit[] = [];
  readonly #failedTargets: string[] = [];
  #finishedLine: string | null = null;
  #renderedErrors = 0;
  #renderedWarnings = 0;
  #pendingDiagnostic: "error" | "warning" | null = null;
  #inTargetList = false;
  #ended = false;
  #stopped = false;
  readonly #panics = new PanicReader((panic) => this.#runs.at(-1)?.panics.push(panic));
  readonly #diagnostics = new CompilerDiagnosticReader();

  finish(): void {
    this.#panics.end();
    this.#diagnostics.end();
    this.#ended = true;
  }

  /** Cargo was stopped from outside: the run going on then did not end on its own. */
  stopped(): void {
    this.#stopped = true;
  }

  pushLine(raw: string, atMs: number | null = null): void {
    if (this.#runs.length > 0) this.#panics.push(raw);
    else this.#diagnostics.push(raw);
    const pending = this.#pendingDiagnostic;
    this.#pendingDiagnostic = null;
    if (pending && LOCATION.test(raw)) {
      if (pending === "error") this.#renderedErrors += 1;
      else this.#renderedWarnings += 1;
      return;
    }
    if (this.#inTargetList) {
      const item = TARGET_ITEM.exec(raw);
      if (item) {
        this.#failedTargets.push(item[1] ?? "");
        return;
      }
      this.#inTargetList = false;
    }
    const line = raw.trim();
    if (line === "") return;

    // Rendered diagnostics are column-0 lines; they belong to the build, before any test ran.
    if (raw === line && this.#runs.length === 0) {
      const diagnostic = DIAGNOSTIC.exec(line);
      if (diagnostic && !line.startsWith("error: could not compile") && !line.startsWith("error: failed to run")) {
        const level = diagnostic[1] === "error" ? "error" : "warning";
        if (diagnostic[2] !== undefined) {
          if (level === "error") this.#renderedErrors += 1;
          else this.#renderedWarnings += 1;
        } else {
          this.#pendingDiagnostic = level;
        }
      }
    }

    const progress = PROGRESS.exec(line);
    if (progress) {
      this.#compiling.push({
        verb: progress[1] ?? "",
        name: progress[2] ?? "",
        version: progress[3] ?? "",
        source: progress[4] ?? null,
        atMs,
      });
      return;
    }
    const finished = FINISHED.exec(line);
    if (finished) {
      this.#finishedLine = finished[1] ?? null;
      return;
    }
    const doc = DOC_TESTS.exec(line);
    if (doc) {
      this.#addRun({ kind: "doctests", sourcePath: null, executable: null, crateName: doc[1] ?? null, atMs });
      return;
    }
    if (line.startsWith("Running ")) {
      this.#runningLine(line, atMs);
      return;
    }
    const failed = TEST_FAILED.exec(line);
    if (failed) {
      const run = this.#runs[this.#runs.length - 1];
      if (run) {
        run.failed = true;
        run.rerunArgs = failed[1] ?? null;
      }
      return;
    }
    const exit = EXIT_DETAIL.exec(line);
    if (exit) {
      const run = this.#runs[this.#runs.length - 1];
      if (run && this.#finishedLine !== null) run.exitDetail = exit[1] ?? null;
      return;
    }
    if (TARGETS_FAILED.test(line)) {
      this.#inTargetList = true;
      return;
    }
    const compileFailed = COULD_NOT_COMPILE.exec(line);
    if (compileFailed) {
      this.#failedUnits.push({
        name: compileFailed[1] ?? "",
        target: compileFailed[2] ?? null,
        errors: compileFailed[3] === undefined ? null : Number(compileFailed[3]),
        version: null,
      });
      return;
    }
    const scriptFailed = BUILD_SCRIPT_FAILED.exec(line);
    if (scriptFailed) {
      this.#failedUnits.push({
        name: scriptFailed[1] ?? "",
        target: "build script",
        errors: null,
        version: scriptFailed[2] ?? null,
      });
    }
  }

  #runningLine(line: string, atMs: number | null): void {
    const verbose = VERBOSE_RUNNING.exec(line);
    if (verbose) {
      // With -v Cargo also prints every rustc, rustdoc and build-script command; only
      // commands after `Finished` that are not tools are test binaries.
      if (this.#finishedLine === null) return;
      const program = firstProgram(verbose[1] ?? "");
      if (program === null) return;
      const base = basename(program);
      if (TOOL_PROGRAMS.has(base) || base.startsWith("build-script-")) return;
      this.#addRun({ kind: "command", sourcePath: null, executable: program, crateName: null, atMs });
      return;
    }
    // `Running [unittests ]<src> (<exe>)`
    if (!line.endsWith(")")) return;
    const open = line.lastIndexOf(" (");
    if (open < 0) return;
    const executable = line.slice(open + 2, -1);
    let source = line.slice("Running ".length, open);
    let kind: StderrRunKind = "target";
    if (source.startsWith("unittests ")) {
      kind = "unittests";
      source = source.slice("unittests ".length);
    }
    this.#addRun({ kind, sourcePath: source, executable, crateName: null, atMs });
  }

  #addRun(run: Omit<MutableRun, "index" | "failed" | "rerunArgs" | "exitDetail" | "panics">): void {
    this.#panics.end();
    this.#runs.push({ ...run, index: this.#runs.length, failed: false, rerunArgs: null, exitDetail: null, panics: [] });
  }

  snapshot(): StderrSnapshot {
    const last = this.#runs.length - 1;
    return {
      compiling: [...this.#compiling],
      finishedLine: this.#finishedLine,
      runs: this.#runs.map((r) => ({
        ...r,
        panics: [...r.panics],
        complete: r.index < last || (this.#ended && !this.#stopped),
        interrupted: r.index === last && this.#ended && this.#stopped,
      })),
      failedUnits: [...this.#failedUnits],
      renderedErrors: this.#renderedErrors,
      renderedWarnings: this.#renderedWarnings,
      failedTargets: [...this.#failedTargets],
      compilerErrors: [...this.#diagnostics.errors],
      ended: this.#ended,
    };
  }
}

/** The program of a shell-quoted command line, skipping leading `NAME=value` assignments. */
function firstProgram(command: string): string | null {
  let rest = command.trim();
  while (rest !== "") {
    let token: string;
    if (rest.startsWith("'")) {
      const close = rest.indexOf("'", 1);
      token = close < 0 ? rest.slice(1) : rest.slice(1, close);
      rest = close < 0 ? "" : rest.slice(close + 1).trimStart();
    } else {
      const space = rest.indexOf(" ");
      token = space < 0 ? rest : rest.slice(0, space);
      rest = space < 0 ? "" : rest.slice(space + 1).trimStart();
    }
    if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(token)) continue;
    return token;
  }
  return null;
}

export function basename(path: string): string {
  const slash = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  return path.slice(slash + 1);
}
