/**
 * Where a host makes its attempts' workspaces and cargo homes: a directory of its own on a
 * memory-backed file system when the machine has one (`/dev/shm` is tmpfs on Linux), else
 * nothing (they stay in the attempt directory on disk).
 *
 * Why: a warm job's fixed cost is mostly making files. Materializing a crate's few dozen
 * source files and directories cost 20–35 ms on this project's ext4 disk and 3–5 ms on tmpfs
 * (docs/benchmarks.md): ext4 without a journal skips inodes deleted in the last minute when it
 * allocates one, so on a disk that builds and deletes trees all day each new file is a scan.
 * Sources are bounded (1 GiB per upload) and live only as long as their attempt; the target
 * dir and the lineages, which are large and kept, stay on disk.
 */
import { createHash } from "node:crypto";
import { accessSync, constants, statfsSync } from "node:fs";
import { join } from "node:path";

/** statfs f_type of tmpfs. */
const TMPFS_MAGIC = 0x01021994;

const MEMORY_BACKED = "/dev/shm";

/**
 * The scratch root for a host whose work root is `workRoot`: named after the work root, so that
 * two agents on one machine never share one (each reaps its own leftovers at start).
 * `KILN_SCRATCH_ROOT=off` keeps everything on disk; another value names the directory.
 */
export function chooseScratchRoot(workRoot: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const configured = env.KILN_SCRATCH_ROOT;
  if (configured === "off") return undefined;
  if (configured !== undefined && configured !== "") return configured;
  try {
    if (statfsSync(MEMORY_BACKED).type !== TMPFS_MAGIC) return undefined;
    accessSync(MEMORY_BACKED, constants.W_OK | constants.X_OK);
  } catch {
    return undefined;
  }
  const id = createHash("sha256").update(workRoot).digest("hex").slice(0, 16);
  return join(MEMORY_BACKED, `kiln-scratch-${id}`);
}
