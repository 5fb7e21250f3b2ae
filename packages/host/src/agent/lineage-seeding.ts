/**
 * Lineage seeding (issue 38): a job whose lineage is new on this host — the repository's first
 * job of its class here — starts from a copy of the tenant's lineage that shares the most
 * dependency builds with it, instead of an empty target dir.
 *
 * Why it is sound: the dependency gateway lays every locked crate out at the same path for
 * every job (/kiln/deps), and every attempt sees its target dir at /kiln/target, so cargo's
 * fingerprint of a dependency unit depends only on the crate (name, version, source,
 * checksum), the toolchain, target, profile, features and flags. The control plane offers only
 * lineages of the same tenant compiled with the same class, injected settings, target and flags
 * (find-lineage-seeds.ts, the placement's `lineageSeeds`); this file ranks them by the locked
 * crates they share with the job's Cargo.lock, and copies the winner's target dir. Anything in
 * the copy cargo does not find fresh (other features, the other repository's own crates) it
 * rebuilds; the seed's workspace units are stale by mtime (the new source's files all carry the
 * attempt's time), so a seeded build's results are a cold build's.
 *
 * What ranks: each lineage records with its head (lineage-store.ts) the digests of the locked
 * crates of its last saved run; the job's own come from its Cargo.lock before the fetch, or,
 * for a source without one, from the Cargo.lock the dependency gateway had cargo generate
 * (before anything is built: attempt-lineage.ts' seedFromGeneratedLockfile). A job without a
 * Cargo.lock that does not go through the gateway is not seeded: cargo resolves inside its build.
 *
 * The copy: the target dir is one sparse disk image (executor/shared/target-disk.ts), copied
 * with `cp --reflink=always` (copy-on-write: O(1) on btrfs or XFS) and, where the file system
 * cannot, `cp --sparse=always` (only the written blocks are read and written). It is made under
 * the seed's lineage lock, so the seed cannot be checked out and written mid-copy.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { releaseKeptDisksUnder } from "../executor/shared/kept-target-disk.js";
import { lockedPackages } from "../gateway/cargo-lock.js";
import { captureGeneratedLockfiles, lockfileCandidates } from "./generated-lockfiles.js";
import type { Placement } from "./host-protocol.js";

const run = promisify(execFile);

/** A lineage the control plane offered as a seed. */
export interface SeedCandidate {
  readonly lineage: string;
  readonly repository: string;
  readonly class: string;
}

/**
 * The text of the Cargo.lock cargo uses for the job: the first one from its working directory
 * up (one in the source, or one a lineage put back), or null when there is none.
 */
export async function workspaceLockfile(
  workspaceDir: string,
  placement: Pick<Placement, "source" | "invocation">,
): Promise<string | null> {
  const workingDirectory = placement.invocation.working_directory ?? ".";
  const segments = workingDirectory.split("/").filter((s) => s !== "" && s !== ".");
  const present = new Set(placement.source.filter((e) => e.kind !== "symlink").map((e) => e.path));
  const paths: string[] = [];
  for (let depth = segments.length; depth >= 0; depth--) {
    const path = [...segments.slice(0, depth), "Cargo.lock"].join("/");
    if (present.has(path)) paths.push(path);
  }
  // A lockfile the lineage put back (cargo generated it for an identical source) counts too.
  paths.push(...lockfileCandidates(placement.source, workingDirectory));
  const [found] = await captureGeneratedLockfiles(workspaceDir, paths);
  return found === undefined ? null : Buffer.from(found.content_base64, "base64").toString("utf8");
}

/**
 * The digests of the crates a Cargo.lock locks outside the workspace (name, version, source,
 * checksum: what cargo's fingerprint of their units starts from), sorted; null when the text
 * is not a lockfile cargo could use.
 */
export function lockedCrateDigests(lockfile: string): string[] | null {
  try {
    const digests = lockedPackages(lockfile).map((p) =>
      createHash("sha256")
        .update(JSON.stringify([p.name, p.version, p.source, p.kind === "registry" ? p.checksum : p.revision]))
        .digest("hex")
        .slice(0, 16),
    );
    return [...new Set(digests)].sort();
  } catch {
    return null;
  }
}

/** How many of `ours` (sorted, distinct) `theirs` holds. */
export function sharedCount(ours: readonly string[], theirs: readonly string[]): number {
  const set = new Set(theirs);
  return ours.reduce((n, digest) => n + (set.has(digest) ? 1 : 0), 0);
}

export type CopyMethod = "reflink" | "sparse";

/**
 * Copies the contents of `from` into the empty directory `to`: copy-on-write where the file
 * system shares extents, else a sparse copy. Returns which.
 */
export async function copyTargetDir(from: string, to: string): Promise<CopyMethod> {
  // The seed's disk may be kept mounted for its lineage (kept-target-disk.ts): a copy of a mounted
  // image would miss what its page cache holds, so it is unmounted first (its next attempt mounts it again).
  await releaseKeptDisksUnder([from, to]);
  try {
    await run("cp", ["-a", "--reflink=always", `${from}/.`, `${to}/`]);
    return "reflink";
  } catch {
    // No shared extents here (ext4, tmpfs): whatever the failed attempt left goes first.
    await emptyDirectory(to);
  }
  await run("cp", ["-a", "--reflink=never", "--sparse=always", `${from}/.`, `${to}/`]);
  return "sparse";
}

export async function emptyDirectory(dir: string): Promise<void> {
  await releaseKeptDisksUnder([dir]);
  const entries = await readdir(dir).catch(() => [] as string[]);
  await Promise.all(entries.map((e) => rm(join(dir, e), { recursive: true, force: true })));
}
