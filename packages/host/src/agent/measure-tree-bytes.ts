/**
 * The disk bytes a directory tree takes, for the lineage's size: measured once, when the
 * tree is checked in, and recorded with it, so that handing it over later reports its size
 * without walking it. `du` counts allocated blocks (what a storage quota is about), counts
 * hard links once (cargo hard-links its outputs into the profile directory), never follows a
 * symlink a job planted and stays on the tree's file system. It is C walking the tree, an
 * order of magnitude faster than doing the same from JavaScript.
 *
 * The sandbox executor's target dir holds a single file, its target disk (an ext4 image): for
 * a file or a handful of files in one directory the same figure comes from lstat here, without
 * starting `du` (a process start on the path to every attempt's report, tens of milliseconds
 * on a loaded host).
 */
import { execFile } from "node:child_process";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Directories of at most this many entries, all regular files, are measured here rather than by `du`. */
const FLAT_ENTRIES = 64;

/** Bytes on disk under `path`, or null when they could not be measured. */
export async function measureTreeBytes(path: string): Promise<number | null> {
  try {
    const flat = await flatTreeBytes(path);
    if (flat !== null) return flat;
    const { stdout } = await run("du", ["-s", "--block-size=1", "--one-file-system", "--", path], {
      maxBuffer: 1 << 20,
    });
    const bytes = Number(/^(\d+)/.exec(stdout)?.[1]);
    return Number.isSafeInteger(bytes) ? bytes : null;
  } catch {
    return null;
  }
}

/**
 * What `du -s` says of a regular file, or of a directory holding only a few regular files (its
 * own blocks and theirs, each inode once); null for anything else, which `du` walks.
 */
async function flatTreeBytes(path: string): Promise<number | null> {
  const top = await lstat(path, { bigint: true });
  if (top.isFile()) return Number(top.blocks * 512n);
  if (!top.isDirectory()) return null;
  const entries = await readdir(path, { withFileTypes: true });
  if (entries.length > FLAT_ENTRIES || entries.some((entry) => !entry.isFile())) return null;
  let bytes = top.blocks * 512n;
  const seen = new Set<string>();
  for (const entry of entries) {
    const stats = await lstat(join(path, entry.name), { bigint: true });
    // Replaced by something else since readdir: let du decide.
    if (!stats.isFile() || stats.dev !== top.dev) return null;
    const inode = `${stats.ino}`;
    if (seen.has(inode)) continue;
    seen.add(inode);
    bytes += stats.blocks * 512n;
  }
  return Number(bytes);
}
