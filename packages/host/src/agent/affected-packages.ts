/**
 * affected_tests at crate granularity (docs/affected-tests.md): which packages a plain
 * `cargo test` would test, which of them a change since a baseline can affect, and so which
 * may be skipped. Pure: manifests come in as text, the change as a list of paths.
 *
 * A package is every Cargo.toml with a [package] table; its directory owns every file below
 * it that no deeper package owns. Path dependencies (normal, dev and build, target-specific
 * too, and `workspace = true` entries resolved through [workspace.dependencies]) give the
 * reverse-dependency graph. Affected = the owners of the changed files and, transitively,
 * everything that depends on them. Anything this cannot place precisely (a changed file no
 * package owns, a changed manifest, an unparseable one, [patch] or [replace]) makes
 * everything affected, with the reason.
 */
import { posix } from "node:path";
import { dependencyTablesOf } from "@kiln/contract";
import { parse } from "smol-toml";

export interface PackageInfo {
  readonly name: string;
  /** The package's directory relative to the source root, "" for the root. */
  readonly dir: string;
}

export type AffectedDecision =
  | { readonly kind: "everything"; readonly reason: string }
  | {
      readonly kind: "subset";
      /** What a plain `cargo test` here tests, sorted. */
      readonly tested: readonly string[];
      /** Of those, the packages the change affects (to run), sorted. */
      readonly affected: readonly string[];
      /** Of those, the ones it cannot affect (to skip), sorted. */
      readonly skipped: readonly string[];
    };

type Table = Record<string, unknown>;

const isTable = (value: unknown): value is Table =>
  value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof Date);

/** The argument of `cargo test …` that selects packages itself (only before `--`), or null. */
export function packageSelectingArgument(args: readonly string[]): string | null {
  for (const arg of args) {
    if (arg === "--") return null;
    if (
      arg === "-p" ||
      (arg.startsWith("-p") && !arg.startsWith("--")) ||
      /^--(package|workspace|all|exclude|manifest-path|features|all-features|no-default-features)(=|$)/.test(arg) ||
      (arg.startsWith("-F") && !arg.startsWith("--"))
    ) {
      return arg;
    }
  }
  return null;
}

/** Paths added, removed, or whose bytes differ from the baseline's (sorted). */
export function changedPaths(
  current: readonly { readonly path: string; readonly sha256: string }[],
  baseline: Readonly<Record<string, string>>,
): string[] {
  const changed = new Set<string>();
  const now = new Set<string>();
  for (const entry of current) {
    now.add(entry.path);
    if (!Object.hasOwn(baseline, entry.path) || baseline[entry.path] !== entry.sha256) changed.add(entry.path);
  }
  for (const path of Object.keys(baseline)) if (!now.has(path)) changed.add(path);
  return [...changed].sort();
}

const dirOf = (manifestPath: string) => {
  const dir = posix.dirname(manifestPath);
  return dir === "." ? "" : dir;
};
const under = (path: string, dir: string) => dir === "" || path === dir || path.startsWith(`${dir}/`);
const joinDir = (dir: string, relative: string) => {
  const joined = posix.normalize(posix.join(dir === "" ? "." : dir, relative));
  return joined === "." ? "" : joined.replace(/\/$/, "");
};

/** Files that configure cargo or the toolchain for the whole build, wherever they are. */
const GLOBAL_FILE = /(^|\/)(\.cargo\/|rust-toolchain(\.toml)?$|Cargo\.lock$)/;

/** A workspace `members` glob (`*`, `?` within a segment) as a predicate on directories. */
function globMatcher(glob: string, root: string): (dir: string) => boolean {
  const pattern = joinDir(root, glob)
    .split("/")
    .map((segment) =>
      segment
        .replace(/[.+^${}()|[\]\\]/g, "\\$&")
        .replace(/\*/g, "[^/]*")
        .replace(/\?/g, "[^/]"),
    )
    .join("/");
  const regex = new RegExp(`^${pattern}$`);
  return (dir) => regex.test(dir);
}

const stringsOf = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];

/**
 * Decides what a `cargo test` run in `workingDirectory` may skip, given every manifest of the
 * source (path → text) and the changed paths.
 */
export function decideAffected(input: {
  readonly manifests: ReadonlyMap<string, string>;
  readonly changed: readonly string[];
  readonly workingDirectory: string;
}): AffectedDecision {
  const parsed = new Map<string, Table>();
  for (const [path, text] of input.manifests) {
    try {
      parsed.set(path, parse(text));
    } catch (error) {
      return {
        kind: "everything",
        reason: `${path} could not be parsed, so the packages cannot be determined (${error instanceof Error ? error.message.split("\n")[0] : error})`,
      };
    }
  }
  // Packages by directory, and workspace roots by directory.
  const packages = new Map<string, PackageInfo & { manifest: Table }>();
  const workspaces = new Map<string, Table>();
  for (const [path, manifest] of parsed) {
    const dir = dirOf(path);
    for (const key of ["patch", "replace"]) {
      if (manifest[key] !== undefined) {
        return { kind: "everything", reason: `${path} has a [${key}] table, which this runtime does not follow` };
      }
    }
    if (isTable(manifest.workspace)) workspaces.set(dir, manifest.workspace);
    if (manifest.package === undefined) continue;
    const name = isTable(manifest.package) ? manifest.package.name : undefined;
    if (typeof name !== "string") {
      return { kind: "everything", reason: `${path} has a [package] table without a name` };
    }
    packages.set(dir, { name, dir, manifest });
  }
  const names = new Map<string, string>();
  for (const pkg of packages.values()) {
    const other = names.get(pkg.name);
    if (other !== undefined) {
      return {
        kind: "everything",
        reason: `two packages are named ${pkg.name} (${other || "."} and ${pkg.dir || "."}): -p cannot tell them apart`,
      };
    }
    names.set(pkg.name, pkg.dir);
  }
  const workspaceRootOf = (dir: string): string | null => {
    let best: string | null = null;
    for (const root of workspaces.keys())
      if (under(dir, root) && (best === null || root.length > best.length)) best = root;
    return best;
  };

  // Reverse path dependencies: dependency dir → dependent dirs.
  const dependents = new Map<string, Set<string>>();
  const pathDependencies = new Map<string, string[]>();
  for (const pkg of packages.values()) {
    const sections = dependencyTablesOf(pkg.manifest);
    const root = workspaceRootOf(pkg.dir);
    const inherited = root === null ? undefined : workspaces.get(root)?.dependencies;
    const deps: string[] = [];
    for (const section of sections) {
      if (!isTable(section)) continue;
      for (const [key, spec] of Object.entries(section)) {
        if (!isTable(spec)) continue;
        let target: string | null = null;
        if (typeof spec.path === "string") target = joinDir(pkg.dir, spec.path);
        else if (spec.workspace === true && root !== null && isTable(inherited)) {
          const shared = inherited[key];
          if (isTable(shared) && typeof shared.path === "string") target = joinDir(root, shared.path);
        }
        if (target !== null && packages.has(target)) deps.push(target);
      }
    }
    pathDependencies.set(pkg.dir, deps);
    for (const dep of deps) {
      const set = dependents.get(dep) ?? new Set<string>();
      set.add(pkg.dir);
      dependents.set(dep, set);
    }
  }

  // What a plain `cargo test` in the working directory tests.
  const wd = input.workingDirectory === "." ? "" : joinDir("", input.workingDirectory);
  const here = parsed.get(wd === "" ? "Cargo.toml" : `${wd}/Cargo.toml`);
  if (here === undefined) return { kind: "everything", reason: `there is no Cargo.toml in ${wd || "."}` };
  let tested: string[];
  const workspace = workspaces.get(wd);
  if (workspace === undefined) {
    const pkg = packages.get(wd);
    if (pkg === undefined) return { kind: "everything", reason: `${wd || "."}/Cargo.toml has no [package] table` };
    tested = [wd];
  } else {
    const excluded = stringsOf(workspace.exclude).map((e) => joinDir(wd, e));
    const isExcluded = (dir: string) => excluded.some((e) => under(dir, e) && e !== wd);
    const matchers = stringsOf(workspace.members).map((glob) => globMatcher(glob, wd));
    const members = new Set<string>();
    if (packages.has(wd)) members.add(wd);
    for (const dir of packages.keys()) if (matchers.some((m) => m(dir)) && !isExcluded(dir)) members.add(dir);
    // Path dependencies of members residing in the workspace's directory are members too.
    const queue = [...members];
    for (let dir = queue.pop(); dir !== undefined; dir = queue.pop()) {
      for (const dep of pathDependencies.get(dir) ?? []) {
        if (!members.has(dep) && under(dep, wd) && !isExcluded(dep)) {
          members.add(dep);
          queue.push(dep);
        }
      }
    }
    if (workspace["default-members"] !== undefined) {
      const defaults = stringsOf(workspace["default-members"]).map((glob) => globMatcher(glob, wd));
      tested = [...members].filter((dir) => defaults.some((m) => m(dir)));
    } else tested = packages.has(wd) ? [wd] : [...members];
  }

  // The owners of the changed files, then everything depending on them.
  const affected = new Set<string>();
  for (const path of input.changed) {
    if (GLOBAL_FILE.test(path))
      return { kind: "everything", reason: `${path} changed (it configures the whole build)` };
    if (posix.basename(path) === "Cargo.toml") {
      return {
        kind: "everything",
        reason: `${path} changed (a manifest can change dependency resolution and features for every package)`,
      };
    }
    let owner: string | null = null;
    for (const dir of packages.keys())
      if (under(path, dir) && (owner === null || dir.length > owner.length)) owner = dir;
    if (owner === null) return { kind: "everything", reason: `${path} changed and belongs to no package` };
    affected.add(owner);
  }
  const queue = [...affected];
  for (let dir = queue.pop(); dir !== undefined; dir = queue.pop()) {
    for (const dependent of dependents.get(dir) ?? []) {
      if (!affected.has(dependent)) {
        affected.add(dependent);
        queue.push(dependent);
      }
    }
  }
  const nameOf = (dir: string) => packages.get(dir)?.name ?? dir;
  return {
    kind: "subset",
    tested: tested.map(nameOf).sort(),
    affected: tested
      .filter((dir) => affected.has(dir))
      .map(nameOf)
      .sort(),
    skipped: tested
      .filter((dir) => !affected.has(dir))
      .map(nameOf)
      .sort(),
  };
}
