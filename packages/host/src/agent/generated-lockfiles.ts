/**
 * Cargo.lock files cargo generated because the source had none. cargo writes one at the
 * workspace root on every run of such a source, with a new mtime; and a build script without
 * `rerun-if-changed` is stale whenever the newest file of its package changes, which that
 * lockfile always is. So a source without a lockfile would rerun its build scripts (and
 * rebuild their crates) on every warm attempt, although nothing changed.
 *
 * Bare cargo's warm run — the same checkout built again — finds the lockfile its first run
 * wrote. The lineage does the same, under a strict condition: the lockfile the previous run
 * generated is put back (same bytes, same mtime to the nanosecond) only when every input of
 * dependency resolution in the source (each Cargo.toml, .cargo/config[.toml],
 * rust-toolchain[.toml]) is byte-identical to the previous run's and the source still has no
 * lockfile there. cargo then resolves to the same lockfile, leaves it untouched, and the build
 * scripts stay fresh. When an input changed, nothing is put back and cargo resolves afresh.
 *
 * The lockfile is read from the workspace after the job ended (no process of it remains), as
 * root, so it is read without following symlinks: a job may have replaced it, or a directory
 * above it, with a link to a host file.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { chmod, open, realpath, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import type { SourceEntry } from "./host-protocol.js";
import type { SourceManifest } from "./source-mtimes.js";

const run = promisify(execFile);

/** Larger than any real lockfile; a bigger file is not kept. */
const MAX_LOCKFILE_BYTES = 8 * 2 ** 20;

export interface GeneratedLockfile {
  readonly path: string;
  readonly sha256: string;
  readonly content_base64: string;
  /** The mtime cargo gave it, `<seconds>.<nanoseconds>` (exact: JavaScript numbers cannot hold it). */
  readonly mtime: string;
}

const RESOLUTION_INPUT =
  /(^|\/)(Cargo\.toml|Cargo\.lock|rust-toolchain|rust-toolchain\.toml|\.cargo\/config|\.cargo\/config\.toml)$/;

/** Whether every input of dependency resolution is byte-identical to the previous run's. */
export function resolutionInputsUnchanged(source: readonly SourceEntry[], previous: SourceManifest): boolean {
  const now = source.filter((e) => RESOLUTION_INPUT.test(e.path));
  const before = Object.keys(previous).filter((p) => RESOLUTION_INPUT.test(p));
  return now.length === before.length && now.every((e) => previous[e.path]?.sha256 === e.sha256);
}

/** Where cargo may write a lockfile the source lacks: the working directory and each directory above it. */
export function lockfileCandidates(source: readonly SourceEntry[], workingDirectory: string): string[] {
  const present = new Set(source.map((e) => e.path));
  const segments = workingDirectory.split("/").filter((s) => s !== "" && s !== ".");
  const candidates: string[] = [];
  for (let depth = segments.length; depth >= 0; depth--) {
    const path = [...segments.slice(0, depth), "Cargo.lock"].join("/");
    if (!present.has(path)) candidates.push(path);
  }
  return candidates;
}

/** The lockfiles cargo left at the candidate paths (regular files reached without any symlink). */
export async function captureGeneratedLockfiles(
  workspaceDir: string,
  candidates: readonly string[],
): Promise<GeneratedLockfile[]> {
  const found: GeneratedLockfile[] = [];
  const root = await realpath(workspaceDir);
  for (const path of candidates) {
    const full = join(workspaceDir, path);
    try {
      // Every directory on the way must be the real one (no link planted above the file)…
      if ((await realpath(dirname(full))) !== dirname(join(root, path))) continue;
      // …and the file itself is opened without following a link.
      const handle = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      try {
        const stats = await handle.stat({ bigint: true });
        if (!stats.isFile() || stats.size > BigInt(MAX_LOCKFILE_BYTES)) continue;
        const bytes = await handle.readFile();
        const ns = stats.mtimeNs;
        found.push({
          path,
          sha256: createHash("sha256").update(bytes).digest("hex"),
          content_base64: bytes.toString("base64"),
          mtime: `${ns / 1_000_000_000n}.${String(ns % 1_000_000_000n).padStart(9, "0")}`,
        });
      } finally {
        await handle.close();
      }
    } catch {
      // Absent (the source had a lockfile elsewhere, or cargo never got that far): nothing to keep.
    }
  }
  return found;
}

/** A stored list of lockfiles, or [] when it is not one. */
export function parseGeneratedLockfiles(value: unknown): GeneratedLockfile[] {
  if (!Array.isArray(value)) return [];
  return value.filter(
    (v): v is GeneratedLockfile =>
      typeof v?.path === "string" &&
      typeof v.sha256 === "string" &&
      typeof v.content_base64 === "string" &&
      typeof v.mtime === "string" &&
      /^\d+\.\d{9}$/.test(v.mtime),
  );
}

/** Puts the lockfiles back into a freshly materialized workspace, with their exact mtimes. */
export async function restoreGeneratedLockfiles(
  workspaceDir: string,
  lockfiles: readonly GeneratedLockfile[],
): Promise<void> {
  for (const lockfile of lockfiles) {
    const full = join(workspaceDir, lockfile.path);
    await writeFile(full, Buffer.from(lockfile.content_base64, "base64"), { flag: "wx" });
    await chmod(full, 0o644);
    // Node's utimes takes a double of seconds, which cannot hold nanoseconds this far from the
    // epoch; GNU touch sets the exact timespec cargo recorded.
    await run("touch", ["-c", "-m", "-d", `@${lockfile.mtime}`, "--", full]);
  }
}
