/**
 * The disk bytes a directory tree takes, for the lineage's size: measured once, when the
 * tree is checked in, and recorded with it, so that handing it over later reports its size
 * without walking it. `du` counts allocated blocks (what a storage quota is about), counts
 * hard links once (cargo hard-links its outputs into the profile directory), never follows a
 * symlink a job planted and stays on the tree's file system. It is C walking the tree, an
 * order of magnitude faster than doing the same from JavaScript.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Bytes on disk under `path`, or null when they could not be measured. */
export async function measureTreeBytes(path: string): Promise<number | null> {
  try {
    const { stdout } = await run("du", ["-s", "--block-size=1", "--one-file-system", "--", path], {
      maxBuffer: 1 << 20,
    });
    const bytes = Number(/^(\d+)/.exec(stdout)?.[1]);
    return Number.isSafeInteger(bytes) ? bytes : null;
  } catch {
    return null;
  }
}
