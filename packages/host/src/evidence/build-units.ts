/**
 * What Cargo built: its units (`compiler-artifact`), build scripts (`build-script-executed`),
 * and the units grouped by package together with what the stderr progress lines add
 * (`Compiling …` starts, `could not compile …` failures).
 */

import type {
  ArtifactProfile,
  ArtifactTarget,
  BuildScriptExecutedMessage,
  CompilerArtifactMessage,
} from "./cargo-messages.js";
import type { CompilingLine, FailedUnit } from "./cargo-stderr.js";
import { type PackageRef, type PackageSourceKind, parsePackageId } from "./package-id.js";

/** One unit Cargo compiled or found fresh (a `compiler-artifact` message). */
export interface CargoUnit {
  readonly packageId: string;
  readonly package: PackageRef;
  readonly target: ArtifactTarget;
  readonly profile: ArtifactProfile;
  readonly features: readonly string[];
  readonly executable: string | null;
  /** True when Cargo reused the unit without rebuilding it. */
  readonly fresh: boolean;
}

/** A build script Cargo ran or reused (a `build-script-executed` message). */
export interface BuildScriptRun {
  readonly packageId: string;
  readonly package: PackageRef;
  readonly cfgs: readonly string[];
  readonly linkedLibs: readonly string[];
  readonly linkedPaths: readonly string[];
  readonly env: readonly (readonly [string, string])[];
  readonly outDir: string | null;
}

/**
 * A package as a whole. fresh: every unit reused; compiled: some unit rebuilt; failed: Cargo
 * could not compile one of its units (or run its build script); incomplete: Cargo started it
 * (`Compiling …`) but reported neither an artifact nor a failure.
 */
export type PackageOutcome = "fresh" | "compiled" | "failed" | "incomplete";

export interface PackageBuild {
  /** From the JSON messages; null for a package only the stderr progress lines named. */
  readonly packageId: string | null;
  readonly name: string;
  readonly version: string;
  readonly sourceKind: PackageSourceKind;
  readonly sourceUrl: string | null;
  readonly outcome: PackageOutcome;
  readonly units: number;
  readonly freshUnits: number;
  /** Failed units as Cargo named them (`lib test`, `bin "app"`, `build script`). */
  readonly failedTargets: readonly string[];
  /** Arrival of its `Compiling` line to arrival of its last artifact; null without arrival times or when fresh. */
  readonly durationMs: number | null;
}

/** A unit with the arrival time of its artifact message, if known. */
export interface TimedUnit {
  readonly unit: CargoUnit;
  readonly atMs: number | null;
}

function packageOf(packageId: string): PackageRef {
  return parsePackageId(packageId) ?? { name: packageId, version: "", sourceKind: "unknown", sourceUrl: null };
}

export function toUnit(message: CompilerArtifactMessage): CargoUnit {
  return {
    packageId: message.packageId,
    package: packageOf(message.packageId),
    target: message.target,
    profile: message.profile,
    features: message.features,
    executable: message.executable,
    fresh: message.fresh,
  };
}

export function toBuildScript(message: BuildScriptExecutedMessage): BuildScriptRun {
  return {
    packageId: message.packageId,
    package: packageOf(message.packageId),
    cfgs: message.cfgs,
    linkedLibs: message.linkedLibs,
    linkedPaths: message.linkedPaths,
    env: message.env,
    outDir: message.outDir,
  };
}

/** Source kind from a progress line's parenthesis: a path, a git URL with `#rev`, `registry `x``, or none (crates.io). */
function progressSource(source: string | null): { kind: PackageSourceKind; url: string | null } {
  if (source === null) return { kind: "registry", url: null };
  if (source.startsWith("registry ")) return { kind: "registry", url: null };
  if (source.includes("://")) return { kind: "git", url: source };
  return { kind: "path", url: source.startsWith("/") ? `file://${source}` : source };
}

interface MutablePackage {
  packageId: string | null;
  name: string;
  version: string;
  sourceKind: PackageSourceKind;
  sourceUrl: string | null;
  units: number;
  freshUnits: number;
  failedTargets: string[];
  startedAtMs: number | null;
  lastArtifactAtMs: number | null;
  started: boolean;
}

export function buildPackages(
  units: readonly TimedUnit[],
  compiling: readonly CompilingLine[],
  failedUnits: readonly FailedUnit[],
): PackageBuild[] {
  const packages: MutablePackage[] = [];
  const byId = new Map<string, MutablePackage>();
  const byNameVersion = new Map<string, MutablePackage>();
  const add = (pkg: MutablePackage) => {
    packages.push(pkg);
    if (pkg.packageId !== null) byId.set(pkg.packageId, pkg);
    byNameVersion.set(`${pkg.name}@${pkg.version}`, pkg);
  };
  for (const { unit, atMs } of units) {
    let pkg = byId.get(unit.packageId);
    if (!pkg) {
      pkg = {
        packageId: unit.packageId,
        name: unit.package.name,
        version: unit.package.version,
        sourceKind: unit.package.sourceKind,
        sourceUrl: unit.package.sourceUrl,
        units: 0,
        freshUnits: 0,
        failedTargets: [],
        startedAtMs: null,
        lastArtifactAtMs: null,
        started: false,
      };
      add(pkg);
    }
    pkg.units += 1;
    if (unit.fresh) pkg.freshUnits += 1;
    else if (atMs !== null) pkg.lastArtifactAtMs = Math.max(pkg.lastArtifactAtMs ?? atMs, atMs);
  }
  for (const line of compiling) {
    if (line.verb === "Fresh") continue;
    let pkg = byNameVersion.get(`${line.name}@${line.version}`);
    if (!pkg) {
      const source = progressSource(line.source);
      pkg = {
        packageId: null,
        name: line.name,
        version: line.version,
        sourceKind: source.kind,
        sourceUrl: source.url,
        units: 0,
        freshUnits: 0,
        failedTargets: [],
        startedAtMs: null,
        lastArtifactAtMs: null,
        started: false,
      };
      add(pkg);
    }
    pkg.started = true;
    if (line.atMs !== null) pkg.startedAtMs = Math.min(pkg.startedAtMs ?? line.atMs, line.atMs);
  }
  for (const failed of failedUnits) {
    const candidates = packages.filter(
      (p) => p.name === failed.name && (failed.version === null || p.version === failed.version),
    );
    // Prefer the package Cargo was compiling (a failed unit emits no artifact).
    const started = candidates.filter((p) => p.started);
    for (const pkg of started.length > 0 ? started : candidates) {
      pkg.failedTargets.push(failed.target ?? "");
    }
    if (candidates.length === 0) {
      add({
        packageId: null,
        name: failed.name,
        version: failed.version ?? "",
        sourceKind: "unknown",
        sourceUrl: null,
        units: 0,
        freshUnits: 0,
        failedTargets: [failed.target ?? ""],
        startedAtMs: null,
        lastArtifactAtMs: null,
        started: true,
      });
    }
  }
  return packages.map((p) => {
    let outcome: PackageOutcome;
    if (p.failedTargets.length > 0) outcome = "failed";
    else if (p.units === 0) outcome = "incomplete";
    else if (p.freshUnits === p.units) outcome = "fresh";
    else outcome = "compiled";
    const durationMs =
      outcome === "compiled" && p.startedAtMs !== null && p.lastArtifactAtMs !== null
        ? Math.max(0, p.lastArtifactAtMs - p.startedAtMs)
        : null;
    return {
      packageId: p.packageId,
      name: p.name,
      version: p.version,
      sourceKind: p.sourceKind,
      sourceUrl: p.sourceUrl,
      outcome,
      units: p.units,
      freshUnits: p.freshUnits,
      failedTargets: p.failedTargets,
      durationMs,
    };
  });
}
