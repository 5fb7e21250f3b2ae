/**
 * Which tests ran in which binary: pairs the libtest blocks read on stdout with the binaries
 * Cargo announced on stderr (align-test-runs.ts), names each binary after the artifact whose
 * executable it ran, and adds up the `test result` lines.
 */

import { alignTestRuns } from "./align-test-runs.js";
import type { CargoUnit } from "./build-units.js";
import { basename, type StderrRun } from "./cargo-stderr.js";
import type { LibtestBlock, LibtestCase, LibtestSummary } from "./libtest-output.js";

export type TestTargetKind = "lib" | "bin" | "test" | "bench" | "example" | "doc" | "unknown";

/** One test binary execution Cargo announced (or, with `index` null, output no announcement accounts for). */
export interface TestBinary {
  readonly index: number | null;
  /** e.g. `mycrate (lib)`, `mycrate::integration`, `mycrate (bin app)`, `mycrate (doc)`. */
  readonly label: string;
  readonly targetKind: TestTargetKind;
  readonly packageName: string | null;
  readonly packageVersion: string | null;
  readonly targetName: string | null;
  readonly executable: string | null;
  readonly sourcePath: string | null;
  /** failed: Cargo reported it failed; passed: it finished otherwise; running: not known yet. */
  readonly status: "passed" | "failed" | "running";
  /** Killed by a signal, or its libtest output stops before `test result` (and cargo was not stopped from outside). */
  readonly crashed: boolean;
  /** Running when cargo was stopped from outside (cancelled, the wall-clock ceiling): its remaining tests did not run. */
  readonly interrupted: boolean;
  readonly exitDetail: string | null;
  readonly rerunArgs: string | null;
  /** It printed libtest output (false for `harness = false` binaries and binaries that died first). */
  readonly libtest: boolean;
  /** Its `test result` lines added up; null when none was printed. */
  readonly summary: LibtestSummary | null;
  readonly tests: readonly ParsedTest[];
}

export interface ParsedTest extends LibtestCase {
  /** The label of the binary that ran it. */
  readonly binary: string;
  readonly binaryIndex: number | null;
}

export interface TestTotals {
  readonly binaries: number;
  readonly failedBinaries: number;
  /** Sums of the `test result` lines. */
  readonly passed: number;
  readonly failed: number;
  readonly ignored: number;
  readonly measured: number;
  readonly filteredOut: number;
  readonly resultLines: number;
  /** Tests listed one by one, by outcome. */
  readonly listed: {
    readonly passed: number;
    readonly failed: number;
    readonly ignored: number;
    readonly bench: number;
  };
}

const LIB_KINDS = new Set(["lib", "rlib", "dylib", "cdylib", "staticlib", "proc-macro"]);
const UNATTRIBUTED = "(unattributed)";

interface BinaryIdentity {
  readonly label: string;
  readonly targetKind: TestTargetKind;
  readonly packageName: string | null;
  readonly packageVersion: string | null;
  readonly targetName: string | null;
}

function targetKindOf(kinds: readonly string[]): TestTargetKind {
  for (const kind of ["test", "bench", "example", "bin"] as const) if (kinds.includes(kind)) return kind;
  return kinds.some((k) => LIB_KINDS.has(k)) ? "lib" : "unknown";
}

function labelOf(pkg: string, kind: TestTargetKind, target: string | null): string {
  switch (kind) {
    case "lib":
      return `${pkg} (lib)`;
    case "doc":
      return `${pkg} (doc)`;
    case "test":
      return `${pkg}::${target ?? "?"}`;
    case "bin":
    case "bench":
    case "example":
      return `${pkg} (${kind} ${target ?? "?"})`;
    default:
      return target ?? pkg;
  }
}

function identify(run: StderrRun, units: readonly CargoUnit[]): BinaryIdentity {
  if (run.kind === "doctests") {
    const crate = run.crateName ?? "?";
    const libs = units.filter((u) => u.target.name === crate && u.target.kinds.some((k) => LIB_KINDS.has(k)));
    const unit = libs.find((u) => u.package.sourceKind === "path") ?? libs[0];
    const packageName = unit?.package.name ?? null;
    return {
      label: labelOf(packageName ?? crate, "doc", crate),
      targetKind: "doc",
      packageName,
      packageVersion: unit?.package.version ?? null,
      targetName: crate,
    };
  }
  const exe = run.executable === null ? null : basename(run.executable);
  const unit = exe === null ? undefined : units.find((u) => u.executable !== null && basename(u.executable) === exe);
  if (unit) {
    const kind = targetKindOf(unit.target.kinds);
    return {
      label: labelOf(unit.package.name, kind, unit.target.name),
      targetKind: kind,
      packageName: unit.package.name,
      packageVersion: unit.package.version,
      targetName: unit.target.name,
    };
  }
  // No artifact message for it: fall back to what the Running line says.
  const stem = (exe ?? "?").replace(/-[0-9a-f]{16}$/, "");
  const source = run.sourcePath ?? "";
  let kind: TestTargetKind = "unknown";
  if (run.kind === "unittests") kind = source.endsWith("lib.rs") ? "lib" : "bin";
  else if (source.startsWith("tests/")) kind = "test";
  else if (source.startsWith("benches/")) kind = "bench";
  else if (source.startsWith("examples/")) kind = "example";
  return {
    label: labelOf(stem, kind, stem),
    targetKind: kind,
    packageName: null,
    packageVersion: null,
    targetName: stem,
  };
}

export function assembleTests(
  units: readonly CargoUnit[],
  runs: readonly StderrRun[],
  blocks: readonly LibtestBlock[],
  looseTextAfter: boolean,
  stdoutEnded: boolean,
): { binaries: TestBinary[]; tests: ParsedTest[] } {
  const assignment = alignTestRuns({
    runs: runs.map((r) => ({
      kind: r.kind === "doctests" ? "doctests" : r.kind === "unittests" ? "unittests" : "other",
      failed: r.failed ? true : r.complete ? false : null,
    })),
    blocks,
    looseTextAfter,
    stdoutEnded,
  });
  const blocksOf = new Map<number | null, LibtestBlock[]>();
  blocks.forEach((block, j) => {
    const run = assignment[j] ?? null;
    const list = blocksOf.get(run) ?? [];
    list.push(block);
    blocksOf.set(run, list);
  });
  const binaries: TestBinary[] = [];
  const make = (run: StderrRun | null, identity: BinaryIdentity, own: readonly LibtestBlock[]): TestBinary => {
    // A failed test whose panic libtest did not capture (--nocapture) wrote it on stderr.
    const uncaptured = [...(run?.panics ?? [])];
    const tests: ParsedTest[] = own.flatMap((b) =>
      b.cases.map((c) => {
        let panic = c.panic;
        if (panic === null && c.outcome === "failed") {
          const at = uncaptured.findIndex((p) => p.thread === c.name);
          if (at >= 0) panic = uncaptured.splice(at, 1)[0] ?? null;
        }
        return { ...c, panic, binary: identity.label, binaryIndex: run?.index ?? null };
      }),
    );
    const signalled = run?.exitDetail?.startsWith("signal") ?? false;
    const interrupted = run?.interrupted ?? false;
    return {
      index: run?.index ?? null,
      ...identity,
      executable: run?.executable ?? null,
      sourcePath: run?.sourcePath ?? null,
      status: run === null ? statusOfBlocks(own) : run.failed ? "failed" : run.complete ? "passed" : "running",
      crashed: !interrupted && (signalled || own.some((b) => b.status === "aborted")),
      interrupted,
      exitDetail: run?.exitDetail ?? null,
      rerunArgs: run?.rerunArgs ?? null,
      libtest: own.length > 0,
      summary: addSummaries(own),
      tests,
    };
  };
  for (const run of runs) binaries.push(make(run, identify(run, units), blocksOf.get(run.index) ?? []));
  const orphans = blocksOf.get(null);
  if (orphans && orphans.length > 0) {
    const unattributed: BinaryIdentity = {
      label: UNATTRIBUTED,
      targetKind: "unknown",
      packageName: null,
      packageVersion: null,
      targetName: null,
    };
    binaries.push(make(null, unattributed, orphans));
  }
  return { binaries, tests: binaries.flatMap((b) => b.tests) };
}

function statusOfBlocks(blocks: readonly LibtestBlock[]): TestBinary["status"] {
  if (blocks.some((b) => b.status === "failed" || b.status === "aborted")) return "failed";
  return blocks.every((b) => b.status === "ok") ? "passed" : "running";
}

function addSummaries(blocks: readonly LibtestBlock[]): LibtestSummary | null {
  let sum: LibtestSummary | null = null;
  for (const block of blocks) {
    const s = block.summary;
    if (!s) continue;
    sum =
      sum === null
        ? { ...s }
        : {
            ok: sum.ok && s.ok,
            passed: sum.passed + s.passed,
            failed: sum.failed + s.failed,
            ignored: sum.ignored + s.ignored,
            measured: sum.measured + s.measured,
            filteredOut: sum.filteredOut + s.filteredOut,
            finishedInMs:
              sum.finishedInMs === null || s.finishedInMs === null ? null : sum.finishedInMs + s.finishedInMs,
          };
  }
  return sum;
}

export function testTotals(
  binaries: readonly TestBinary[],
  blocks: readonly LibtestBlock[],
  tests: readonly ParsedTest[],
): TestTotals {
  const sum = { passed: 0, failed: 0, ignored: 0, measured: 0, filteredOut: 0, resultLines: 0 };
  for (const block of blocks) {
    const s = block.summary;
    if (!s) continue;
    sum.passed += s.passed;
    sum.failed += s.failed;
    sum.ignored += s.ignored;
    sum.measured += s.measured;
    sum.filteredOut += s.filteredOut;
    sum.resultLines += 1;
  }
  const listed = { passed: 0, failed: 0, ignored: 0, bench: 0 };
  for (const t of tests) listed[t.outcome] += 1;
  const announced = binaries.filter((b) => b.index !== null);
  return {
    binaries: announced.length,
    failedBinaries: announced.filter((b) => b.status === "failed").length,
    ...sum,
    listed,
  };
}
