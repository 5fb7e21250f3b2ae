/**
 * Maps parsed Cargo output onto the JobEvidence report's `crates` and `tests` items
 * (packages/contract, records/jobs.ts). Both item shapes are open, so what the contract has no
 * member for travels as extra snake_case members.
 */

import type { CrateItem, FailureLocation, FailureReportItem, TestItem } from "@kiln/contract";
import type { PackageSourceKind } from "./package-id.js";
import type { ParsedCargoOutput } from "./parse-cargo-output.js";

/** A report `crates` item, with the extra members this mapping adds. */
export type ReportCrateItem = CrateItem & {
  /** Cargo's package id; null for a package only the progress lines named. */
  package_id?: string | null;
  /** Units (lib, bins, tests, build script, …) Cargo reported for the package. */
  units?: number;
  fresh_units?: number;
  /** Failed units as Cargo named them (`lib test`, `build script`). */
  failed_targets?: string[];
};

/** A report `tests` item, with the extra members this mapping adds. */
export type ReportTestItem = TestItem & {
  /** The attempt that ran it (the control plane sets it again when it merges attempts). */
  attempt: number;
  /** libtest's mode: `should panic`, `compile fail` or `compile` (doctest `no_run`). */
  mode?: string;
  ignore_reason?: string;
  bench?: { ns_per_iter: number; deviation_ns: number; mb_per_s: number | null };
  failure_output?: string;
  failure_output_truncated?: boolean;
  /** A failed test's panic: its message and where it points (as printed, until the agent maps it). */
  panic?: { message: string; location: FailureLocation | null };
};

export interface ReportMappingOptions {
  /** The attempt that produced the output (1-based). */
  readonly attempt: number;
  /** Bound on the failure output carried across all test items together. Default 65536. */
  readonly maxFailureOutputTotal?: number;
}

/**
 * One item per package (the contract's crates are name + version, not Cargo's units).
 * `source`: path packages (workspace members and other path dependencies) are `workspace`;
 * registry, sparse-registry, local-registry and directory (vendored) sources are `registry`.
 * Packages Cargo started but neither finished nor failed are left out.
 */
export function toReportCrates(parsed: ParsedCargoOutput): ReportCrateItem[] {
  const items: ReportCrateItem[] = [];
  for (const pkg of parsed.packages) {
    if (pkg.outcome === "incomplete") continue;
    items.push({
      name: pkg.name,
      version: pkg.version,
      source: reportSource(pkg.sourceKind),
      outcome: pkg.outcome,
      duration_ms: pkg.durationMs,
      package_id: pkg.packageId,
      units: pkg.units,
      fresh_units: pkg.freshUnits,
      ...(pkg.failedTargets.length > 0 ? { failed_targets: [...pkg.failedTargets] } : {}),
    });
  }
  return items;
}

/**
 * One item per test libtest reported. A benchmark that ran (`bench: … ns/iter`) is `passed`
 * and carries `bench`; `ignored` carries `ignore_reason` when given; a failed test carries its
 * bounded failure output.
 */
export function toReportTests(parsed: ParsedCargoOutput, options: ReportMappingOptions): ReportTestItem[] {
  let budget = options.maxFailureOutputTotal ?? 65536;
  return parsed.tests.map((test) => {
    const item: ReportTestItem = {
      target: test.binary,
      name: test.name,
      outcome: test.outcome === "bench" ? "passed" : test.outcome,
      attempt: options.attempt,
      duration_ms: test.durationMs,
    };
    if (test.mode !== null) item.mode = test.mode;
    if (test.ignoreReason !== null) item.ignore_reason = test.ignoreReason;
    if (test.bench !== null) {
      item.bench = {
        ns_per_iter: test.bench.nsPerIter,
        deviation_ns: test.bench.deviationNs,
        mb_per_s: test.bench.mbPerSecond,
      };
    }
    if (test.outcome === "failed" && test.panic !== null) {
      item.panic = {
        message: test.panic.message,
        location: printedLocation(test.panic.file, test.panic.line, test.panic.column),
      };
    }
    if (test.failureOutput !== null) {
      const kept = test.failureOutput.slice(0, Math.max(0, budget));
      budget -= kept.length;
      item.failure_output = kept;
      item.failure_output_truncated = test.failureOutputTruncated || kept.length < test.failureOutput.length;
    }
    return item;
  });
}

/** Failed tests reported one by one in `failures`; past it, the tests table still lists every one. */
const MAX_REPORTED_PANICS = 50;

/**
 * The failures the output names, first: the first rustc errors, then every failed test (up to
 * MAX_REPORTED_PANICS) with its panic, in the order they ran. A failed test that did not panic
 * (a `should_panic` test that returned, a crashed binary) is there too, its message the last
 * line of its output. Locations are as printed: the agent maps them to repository paths.
 */
export function toReportFailures(parsed: ParsedCargoOutput): FailureReportItem[] {
  const failures: FailureReportItem[] = parsed.build.firstErrors.map((error) => ({
    kind: "compiler_error",
    message: error.message,
    code: error.code,
    target: null,
    test: null,
    location:
      error.file === null || error.line === null || error.column === null
        ? null
        : printedLocation(error.file, error.line, error.column),
    rendered: error.rendered,
  }));
  for (const test of parsed.tests) {
    if (test.outcome !== "failed") continue;
    if (failures.length >= parsed.build.firstErrors.length + MAX_REPORTED_PANICS) break;
    const lastLine =
      test.failureOutput
        ?.split("\n")
        .filter((l) => l.trim() !== "")
        .at(-1) ?? "the test failed without a panic message";
    failures.push({
      kind: "test_panic",
      message: test.panic?.message ?? lastLine,
      code: null,
      target: test.binary,
      test: test.name,
      location: test.panic === null ? null : printedLocation(test.panic.file, test.panic.line, test.panic.column),
    });
  }
  return failures;
}

/** A location as the output printed it; `in_repository` stays false until the agent maps `file`. */
export function printedLocation(file: string, line: number, column: number): FailureLocation {
  return { file, line, column, in_repository: false, printed: `${file}:${line}:${column}` };
}

export function toReportItems(
  parsed: ParsedCargoOutput,
  options: ReportMappingOptions,
): { crates: ReportCrateItem[]; tests: ReportTestItem[] } {
  return { crates: toReportCrates(parsed), tests: toReportTests(parsed, options) };
}

function reportSource(kind: PackageSourceKind): ReportCrateItem["source"] {
  switch (kind) {
    case "git":
      return "git";
    case "registry":
    case "directory":
      return "registry";
    default:
      return "workspace";
  }
}
