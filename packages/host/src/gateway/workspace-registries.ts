import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { dependencyTablesOf } from "@kiln/contract/cargo-manifest";
import { parse } from "smol-toml";
import type { GitReference } from "./cargo-lock.js";

type Table = Record<string, unknown>;
const isTable = (value: unknown): value is Table =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * The registries a workspace names in its own `.cargo/config.toml` (`[registries.<name>]
 * index`): only their names and index URLs are read. Nothing else of the repository's Cargo
 * configuration is used on the host (it may name credential providers, which are programs).
 */
export async function workspaceRegistries(workspaceDir: string): Promise<Map<string, string>> {
  const registries = new Map<string, string>();
  for (const file of [".cargo/config", ".cargo/config.toml"]) {
    let text: string;
    try {
      text = await readFile(join(workspaceDir, file), "utf8");
    } catch {
      continue;
    }
    let doc: unknown;
    try {
      doc = parse(text);
    } catch {
      continue;
    }
    if (!isTable(doc) || !isTable(doc.registries)) continue;
    for (const [name, entry] of Object.entries(doc.registries)) {
      if (isTable(entry) && typeof entry.index === "string") registries.set(name, entry.index);
    }
  }
  return registries;
}

/** A dependency a manifest names directly: its real package name and the registry it comes from (null: crates.io). */
export interface DirectDependency {
  readonly name: string;
  readonly registry: string | null;
}

/**
 * Every registry dependency the workspace's manifests name (plain, dev and build, per target,
 * and `[workspace.dependencies]`): the roots of the index the gateway gathers when the source
 * has no Cargo.lock. Path and git dependencies are not registry roots.
 */
export function directDependencies(manifests: readonly string[]): DirectDependency[] {
  const found = new Map<string, DirectDependency>();
  const collect = (table: unknown) => {
    if (!isTable(table)) return;
    for (const [key, spec] of Object.entries(table)) {
      if (typeof spec === "string") {
        found.set(`${key}\u0000`, { name: key, registry: null });
        continue;
      }
      if (!isTable(spec) || typeof spec.path === "string" || typeof spec.git === "string") continue;
      if (spec.workspace === true) continue;
      const name = typeof spec.package === "string" ? spec.package : key;
      const registry = typeof spec.registry === "string" ? spec.registry : null;
      found.set(`${name}\u0000${registry ?? ""}`, { name, registry });
    }
  };
  forEachDependencyTable(manifests, collect);
  return [...found.values()];
}

/** A git dependency a manifest names directly: its URL and the reference it asks for. */
export interface DirectGitDependency {
  readonly url: string;
  readonly reference: GitReference;
}

/** Every git dependency the workspace's manifests name (also under `[workspace.dependencies]` and `[patch]`). */
export function directGitDependencies(manifests: readonly string[]): DirectGitDependency[] {
  const found = new Map<string, DirectGitDependency>();
  const collect = (table: unknown) => {
    if (!isTable(table)) return;
    for (const spec of Object.values(table)) {
      if (!isTable(spec) || typeof spec.git !== "string") continue;
      const reference: GitReference =
        typeof spec.branch === "string"
          ? { kind: "branch", value: spec.branch }
          : typeof spec.tag === "string"
            ? { kind: "tag", value: spec.tag }
            : typeof spec.rev === "string"
              ? { kind: "rev", value: spec.rev }
              : { kind: "default" };
      found.set(`${spec.git}\u0000${JSON.stringify(reference)}`, { url: spec.git, reference });
    }
  };
  forEachDependencyTable(manifests, collect);
  return [...found.values()];
}

/** Calls `visit` with every dependency table of the manifests: plain, dev and build, per target, workspace and patch. */
function forEachDependencyTable(manifests: readonly string[], visit: (table: unknown) => void): void {
  for (const text of manifests) {
    let doc: unknown;
    try {
      doc = parse(text);
    } catch {
      continue;
    }
    if (!isTable(doc)) continue;
    for (const table of dependencyTablesOf(doc)) visit(table);
    if (isTable(doc.workspace)) visit(doc.workspace.dependencies);
    if (isTable(doc.patch)) for (const patches of Object.values(doc.patch)) visit(patches);
  }
}
