import type { StatsFs } from "node:fs";
import { stat, statfs } from "node:fs/promises";
import { dirname, join } from "node:path";
import { TARGET_DISK_FILE } from "../executor/target-disk.js";

/** A running attempt's claim on the host's disk: its directory in the work root and its quota. */
export interface AttemptDiskReservation {
  readonly attemptDir: string;
  readonly quotaBytes: number;
}

/**
 * Bytes an attempt has already written towards its quota: its target disk's allocated blocks.
 * The image is in the attempt's target dir, which is its lineage slot's when one was restored.
 */
async function writtenBytes(attemptDir: string): Promise<number> {
  for (const targetDir of [join(attemptDir, "lineage", "target"), join(attemptDir, "target")]) {
    const image = await stat(join(targetDir, TARGET_DISK_FILE)).catch(() => null);
    if (image !== null) return image.blocks * 512;
  }
  return 0;
}

/**
 * statfs of the file system `path` is or will be on: its nearest existing directory (a host's
 * work root is made with its first attempt, and is on its parent's file system until then).
 */
async function statfsOfVolume(path: string): Promise<StatsFs> {
  for (let at = path; ; at = dirname(at)) {
    try {
      return await statfs(at);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || dirname(at) === at) throw error;
    }
  }
}

/**
 * The largest disk quota this host can still grant one more attempt: what the work root's
 * volume has free for an unprivileged writer now, less what each running attempt may still write
 * within its quota (its quota less what its target disk already holds, which the free space
 * already counts). Concurrent attempts' quotas are thereby covered by the disk, however many the
 * vCPUs would allow (8 × 16 GiB on 77 GB free was not). Lineages at rest are in the free space
 * already; an attempt placed but not yet writing reserves its whole quota.
 */
export async function diskHeadroom(workRoot: string, running: Iterable<AttemptDiskReservation>): Promise<number> {
  const volume = await statfsOfVolume(workRoot);
  let headroom = volume.bavail * volume.bsize;
  for (const attempt of running) {
    headroom -= Math.max(0, attempt.quotaBytes - (await writtenBytes(attempt.attemptDir)));
  }
  return Math.max(0, Math.floor(headroom));
}
