/**
 * affected_tests for one attempt (docs/affected-tests.md): decides, before cargo runs, whether
 * a `cargo test` job may run only the packages the change since its lineage's baseline
 * affects, the arguments it then runs with (or that it runs nothing at all), the evidence's
 * `affected_tests` member, and after the run whether this run becomes the next baseline.
 */
import { readFile } from "node:fs/promises";
import { posix } from "node:path";
import { changedPaths, decideAffected, packageSelectingArgument } from "./affected-packages.js";
import type { AttemptLineage, TestBaseline } from "./attempt-lineage.js";
import type { AffectedTestsItem, Placement } from "./host-protocol.js";

export interface AffectedTestsPlan {
  /** The cargo arguments to run with, or null: run no cargo at all (nothing is affected). */
  readonly arguments: readonly string[] | null;
  /** The evidence's `affected_tests` member (null: not a test job and the setting is off). */
  readonly evidence: AffectedTestsItem | null;
  /** Whether a passing run tests every package a plain `cargo test` would (given the baseline). */
  readonly coversEverything: boolean;
}

/** What the baseline's run must have had in common with this one for a comparison to mean anything. */
export function invocationKey(placement: Placement, injectedEnvironment: Readonly<Record<string, string>>): string {
  const inv = placement.invocation;
  const sortedEntries = (o: Readonly<Record<string, string>>) => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1));
  return JSON.stringify({
    arguments: inv.arguments,
    environment: sortedEntries(inv.environment ?? {}),
    injected: sortedEntries(injectedEnvironment),
    working_directory: posix.normalize(inv.working_directory ?? "."),
  });
}

export async function planAffectedTests(
  placement: Placement,
  lineage: AttemptLineage | null,
  workspaceDir: string,
  key: string,
): Promise<AffectedTestsPlan> {
  const args = placement.invocation.arguments;
  const isTest = placement.invocation.operation === "test";
  const selecting = packageSelectingArgument(args);
  const everything = (reason: string, baseline: TestBaseline | null = null): AffectedTestsPlan => ({
    arguments: args,
    evidence: {
      enabled: placement.affectedTests === true,
      applied: false,
      reason,
      baseline:
        baseline === null ? null : { job: baseline.job, restored_generation: lineage?.restoredGeneration ?? null },
      changed_files: null,
      affected: [],
      skipped: [],
      ran_cargo: true,
    },
    coversEverything: isTest && selecting === null,
  });
  if (placement.affectedTests !== true) {
    return isTest
      ? everything("the repository's affected_tests setting was off at admission: every test ran")
      : { arguments: args, evidence: null, coversEverything: false };
  }
  if (!isTest)
    return everything(`affected_tests applies to cargo test only, not cargo ${placement.invocation.operation}`);
  if (selecting !== null)
    return everything(`the job's arguments select packages themselves (${selecting}): run as asked`);
  if ((placement.invocation.artifacts ?? []).length > 0) return everything("the job asks for artifacts: run as asked");
  const baseline = lineage?.testBaseline ?? null;
  if (lineage === null || !lineage.warm || baseline === null) {
    return everything(
      `no baseline: ${lineage === null || !lineage.warm ? "the lineage is cold" : "the lineage has no passing cargo test run of every package yet"}, so every test ran`,
    );
  }
  if (baseline.invocation !== key) {
    return everything(
      `the arguments, environment or working directory differ from those of the baseline (job ${baseline.job}): every test ran`,
      baseline,
    );
  }
  const changed = changedPaths(placement.source, baseline.sources);
  const manifests = new Map<string, string>();
  try {
    for (const entry of placement.source) {
      if (posix.basename(entry.path) === "Cargo.toml") {
        manifests.set(entry.path, await readFile(posix.join(workspaceDir, entry.path), "utf8"));
      }
    }
  } catch (error) {
    return everything(`the manifests could not be read (${error instanceof Error ? error.message : error})`, baseline);
  }
  const decision = decideAffected({
    manifests,
    changed,
    workingDirectory: placement.invocation.working_directory ?? ".",
  });
  const named = { job: baseline.job, restored_generation: lineage.restoredGeneration };
  if (decision.kind === "everything") {
    return {
      ...everything(`${decision.reason}: every test ran`, baseline),
      evidence: {
        enabled: true,
        applied: false,
        reason: `${decision.reason}: every test ran`,
        baseline: named,
        changed_files: changed.length,
        affected: [],
        skipped: [],
        ran_cargo: true,
      },
    };
  }
  const since = `since the baseline (job ${baseline.job}'s passing test run, lineage generation ${lineage.restoredGeneration})`;
  const evidence = (reason: string, ranCargo: boolean) => ({
    enabled: true,
    applied: true,
    reason,
    baseline: named,
    changed_files: changed.length,
    affected: [...decision.affected],
    skipped: [...decision.skipped],
    ran_cargo: ranCargo,
  });
  if (decision.affected.length === 0) {
    return {
      arguments: null,
      evidence: evidence(
        changed.length === 0
          ? `nothing changed ${since}: no test ran`
          : `${changed.length} file(s) changed ${since}, none in a package cargo test tests here: no test ran`,
        false,
      ),
      coversEverything: true,
    };
  }
  if (decision.skipped.length === 0) {
    return {
      arguments: args,
      evidence: evidence(`${changed.length} file(s) changed ${since}; every package is affected`, true),
      coversEverything: true,
    };
  }
  const dashDash = args.indexOf("--");
  const before = dashDash < 0 ? args : args.slice(0, dashDash);
  const after = dashDash < 0 ? [] : args.slice(dashDash);
  return {
    arguments: [...before, ...decision.affected.flatMap((name) => ["-p", name]), ...after],
    evidence: evidence(
      `${changed.length} file(s) changed ${since}; the tests of ${decision.skipped.length} unaffected package(s) were skipped`,
      true,
    ),
    coversEverything: true,
  };
}
