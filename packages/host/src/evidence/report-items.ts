/**
 * Maps parsed Cargo output onto the JobEvidence report's `crates` and `tests` items
 * (packages/contract, records/jobs.ts). Both item shapes are open, so what the contract has no
 * member for travels as extra snake_case members.
 */

import type { CrateItem, TestItem } from "@kiln/contract";
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
    if (test.failureOutput !== null) {
      const kept = test.failureOutput.slice(0, Math.max(0, budget));
      budget -= kept.length;
      item.failure_output = kept;
      item.failure_output_truncated = test.failureOutputTruncated || kept.length < test.failureOutput.length;
    }
    return item;
  });
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
