import { posix } from "node:path";
import { dependencyTablesOf } from "@kiln/contract";
import type { AdmissionSource } from "./admission-source.js";

/** What admission decided about the job's network, and why, in words for the job's log. */
export interface NetworkPolicyDecision {
  readonly policy: "offline" | "dependency-gateway";
  readonly reason: string;
}

type Table = Record<string, unknown>;

const isTable = (value: unknown): value is Table =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A dependency that does not come from a path inside the captured workspace. */
interface ExternalDependency {
  readonly name: string;
  readonly manifest: string;
  /** `crates-io`, a `[registries]` name, or `git <url>`. */
  readonly source: string;
}

/** Where one dependency entry comes from: a path (inside), or an external source. */
function sourceOf(spec: unknown, workspaceDependency: unknown): { path: string } | { source: string } {
  const entry = isTable(spec) && spec.workspace === true ? workspaceDependency : spec;
  if (typeof entry === "string") return { source: "crates-io" };
  if (!isTable(entry)) return { source: "crates-io" };
  if (typeof entry.path === "string") return { path: entry.path };
  if (typeof entry.git === "string") return { source: `git ${entry.git}` };
  if (typeof entry.registry === "string") return { source: entry.registry };
  return { source: "crates-io" };
}

/** `members` globs of a workspace (`*` within one segment, as cargo's glob does), against the captured directories. */
function expandMembers(root: string, patterns: readonly string[], manifests: ReadonlySet<string>): string[] {
  const found: string[] = [];
  for (const pattern of patterns) {
    const full = posix.normalize(posix.join(root, pattern));
    const regex = new RegExp(
      `^${full
        .split("/")
        .map((segment) =>
          segment
            .replace(/[.+^${}()|[\]\\]/g, "\\$&")
            .replace(/\*/g, "[^/]*")
            .replace(/\?/g, "[^/]"),
        )
        .join("/")}$`,
    );
    for (const manifest of manifests) {
      const dir = posix.dirname(manifest);
      if (regex.test(dir)) found.push(dir);
    }
  }
  return found;
}

/**
 * Admission's network policy for a captured workspace (DESIGN.md §6): `offline` when every
 * dependency is satisfied inside it — path dependencies, or registry dependencies the
 * workspace's own Cargo configuration replaces with a directory or local-registry source (a
 * vendored tree) — else `dependency-gateway`, naming the first dependency from outside. It
 * reads the working directory's package or workspace, its members and everything they reach
 * by path, with `workspace = true` entries resolved against `[workspace.dependencies]`, and the
 * root's `[patch]` and `[replace]` tables. A manifest that does not parse decides nothing: cargo
 * will report it; the job runs offline and fails there as it would locally.
 */
export async function decideNetworkPolicy(input: {
  readonly source: Pick<AdmissionSource, "paths" | "toml">;
  readonly workingDirectory: string;
}): Promise<NetworkPolicyDecision> {
  const manifests = new Set(input.source.paths.filter((p) => p === "Cargo.toml" || p.endsWith("/Cargo.toml")));
  const read = async (path: string): Promise<Table | null> => {
    const document = await input.source.toml(path);
    return document !== null && "toml" in document && isTable(document.toml) ? document.toml : null;
  };
  const manifestAt = (dir: string) => (dir === "." || dir === "" ? "Cargo.toml" : `${dir}/Cargo.toml`);

  // The workspace root: the nearest manifest upward from the working directory with [workspace],
  // else the working directory's own manifest.
  const start = posix.normalize(input.workingDirectory);
  const ancestors: string[] = [];
  for (let dir = start; ; dir = posix.dirname(dir)) {
    ancestors.push(dir);
    if (dir === "." || dir === "/" || dir === "") break;
  }
  let rootDir: string | null = null;
  let root: Table | null = null;
  for (const dir of ancestors) {
    const manifest = manifests.has(manifestAt(dir)) ? await read(manifestAt(dir)) : null;
    if (manifest !== null && isTable(manifest.workspace)) {
      rootDir = dir;
      root = manifest;
      break;
    }
    if (manifest !== null && rootDir === null) {
      rootDir = dir;
      root = manifest;
    }
  }
  if (root === null || rootDir === null) {
    return {
      policy: "offline",
      reason: "no Cargo.toml is readable on the working directory's path; cargo will say why",
    };
  }

  const workspace = isTable(root.workspace) ? root.workspace : null;
  const workspaceDependencies = isTable(workspace?.dependencies) ? workspace.dependencies : {};
  const members = Array.isArray(workspace?.members)
    ? expandMembers(
        rootDir,
        workspace.members.filter((m): m is string => typeof m === "string"),
        manifests,
      )
    : [];
  const queue = [rootDir, ...members];
  const visited = new Set<string>();
  const external: ExternalDependency[] = [];
  let pathDependencies = 0;
  while (queue.length > 0) {
    const dir = posix.normalize(queue.shift() ?? ".");
    if (visited.has(dir)) continue;
    visited.add(dir);
    const path = manifestAt(dir);
    const manifest = dir === rootDir ? root : manifests.has(path) ? await read(path) : null;
    if (manifest === null) continue;
    for (const table of dependencyTablesOf(manifest)) {
      for (const [name, spec] of Object.entries(table)) {
        const source = sourceOf(spec, workspaceDependencies[name]);
        if ("path" in source) {
          pathDependencies += 1;
          queue.push(posix.join(dir, source.path));
        } else external.push({ name, manifest: path, source: source.source });
      }
    }
  }
  // [patch.<source>] and [replace] of the root: a path patch is inside, a git one is not.
  for (const table of [...(isTable(root.patch) ? Object.values(root.patch) : []), root.replace]) {
    if (!isTable(table)) continue;
    for (const [name, spec] of Object.entries(table)) {
      const source = sourceOf(spec, undefined);
      if ("source" in source && source.source.startsWith("git ")) {
        external.push({ name, manifest: manifestAt(rootDir), source: source.source });
      }
    }
  }

  if (external.length === 0) {
    return {
      policy: "offline",
      reason:
        pathDependencies === 0
          ? "no dependencies outside the workspace"
          : `every dependency is inside the workspace (${pathDependencies} path dependenc${pathDependencies === 1 ? "y" : "ies"})`,
    };
  }

  // Source replacement the workspace configures for itself: a registry replaced by a directory
  // or local-registry source is satisfied offline.
  // Keys are the dependency sources named above: `crates-io`, a [registries] name, `git <url>`.
  const replaced = new Map<string, string>();
  for (const dir of ancestors) {
    for (const name of [".cargo/config.toml", ".cargo/config"]) {
      const path = dir === "." ? name : `${dir}/${name}`;
      const config = await read(path);
      const sources = isTable(config?.source) ? config.source : null;
      if (sources === null) continue;
      const registries = isTable(config?.registries) ? config.registries : {};
      for (const [sourceName, definition] of Object.entries(sources)) {
        if (!isTable(definition) || typeof definition["replace-with"] !== "string") continue;
        const target = sources[definition["replace-with"]];
        if (!isTable(target)) continue;
        const local = typeof target.directory === "string" ? target.directory : target["local-registry"];
        if (typeof local !== "string") continue;
        const how = `${typeof target.directory === "string" ? "directory" : "local-registry"} source ${local} (${path})`;
        // A source is named by its table key (crates-io), or defined by its git URL or registry index.
        const keys = [sourceName];
        if (typeof definition.git === "string") keys.push(`git ${definition.git}`);
        if (typeof definition.registry === "string") {
          for (const [registry, entry] of Object.entries(registries)) {
            if (isTable(entry) && entry.index === definition.registry) keys.push(registry);
          }
        }
        for (const key of keys) if (!replaced.has(key)) replaced.set(key, how);
      }
    }
  }
  const unsatisfied = external.filter((d) => !replaced.has(d.source));
  if (unsatisfied.length === 0) {
    const via = [...new Set(external.map((d) => `${d.source} is replaced by the ${replaced.get(d.source)}`))];
    return { policy: "offline", reason: `every dependency is inside the workspace: ${via.join("; ")}` };
  }
  const first = unsatisfied[0] as ExternalDependency;
  const more = unsatisfied.length > 1 ? ` and ${unsatisfied.length - 1} more` : "";
  return {
    policy: "dependency-gateway",
    reason: `${first.name} (${first.source}, in ${first.manifest})${more} comes from outside the captured workspace: the host's dependency gateway provides the locked packages; the job itself still has no network`,
  };
}
