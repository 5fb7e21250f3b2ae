import { parse } from "smol-toml";
import { GatewayError } from "./gateway-error.js";

/** The crates.io source as Cargo.lock names it, whichever protocol reached it. */
export const CRATES_IO_SOURCE = "registry+https://github.com/rust-lang/crates.io-index";

/** One `[[package]]` of a Cargo.lock that comes from outside the workspace. */
export type LockedPackage =
  | {
      readonly kind: "registry";
      readonly name: string;
      readonly version: string;
      /** The lock's `source` verbatim: `registry+<url>` or `sparse+<url>`. */
      readonly source: string;
      readonly checksum: string | null;
    }
  | {
      readonly kind: "git";
      readonly name: string;
      readonly version: string;
      readonly source: string;
      readonly url: string;
      readonly revision: string;
      /** What the manifest asked for (`?branch=`, `?tag=`, `?rev=`), which the commit was resolved from. */
      readonly reference: GitReference;
    };

/** A git dependency's requested reference: a branch, tag, revision, or the default branch. */
export type GitReference =
  | { readonly kind: "branch" | "tag" | "rev"; readonly value: string }
  | { readonly kind: "default" };

/** The reference a git source's query names. */
export function gitReferenceOf(search: URLSearchParams): GitReference {
  for (const kind of ["branch", "tag", "rev"] as const) {
    const value = search.get(kind);
    if (value !== null) return { kind, value };
  }
  return { kind: "default" };
}

const isTable = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * The packages a Cargo.lock locks outside the workspace (path packages carry no `source`).
 * Version 1 lockfiles keep checksums in `[metadata]`; they are read from there too.
 */
export function lockedPackages(text: string): LockedPackage[] {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (error) {
    throw new GatewayError("invalid_lockfile", `Cargo.lock is not valid TOML: ${(error as Error).message}`);
  }
  const metadata = isTable(doc.metadata) ? doc.metadata : {};
  const packages = Array.isArray(doc.package) ? doc.package : [];
  const locked: LockedPackage[] = [];
  for (const entry of packages) {
    if (!isTable(entry)) continue;
    const { name, version, source } = entry;
    if (typeof name !== "string" || typeof version !== "string" || typeof source !== "string") continue;
    if (source.startsWith("git+")) {
      let url: URL;
      try {
        url = new URL(source.slice("git+".length));
      } catch {
        throw new GatewayError(
          "invalid_lockfile",
          `Cargo.lock locks ${name} ${version} to a git source that is not a URL`,
        );
      }
      const revision = url.hash.slice(1);
      const reference = gitReferenceOf(url.searchParams);
      url.hash = "";
      url.search = "";
      if (!/^[0-9a-f]{40}$/.test(revision)) {
        throw new GatewayError("invalid_lockfile", `Cargo.lock locks ${name} ${version} to ${source} without a commit`);
      }
      locked.push({ kind: "git", name, version, source, url: url.toString(), revision, reference });
      continue;
    }
    if (!source.startsWith("registry+") && !source.startsWith("sparse+")) {
      throw new GatewayError(
        "invalid_lockfile",
        `Cargo.lock names an unknown source kind for ${name} ${version}: ${source}`,
      );
    }
    const fromMetadata = metadata[`checksum ${name} ${version} (${source})`];
    const checksum =
      typeof entry.checksum === "string" ? entry.checksum : typeof fromMetadata === "string" ? fromMetadata : null;
    locked.push({ kind: "registry", name, version, source, checksum });
  }
  return locked;
}
