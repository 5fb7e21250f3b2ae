import { readdir, readFile, rmdir } from "node:fs/promises";
import { join } from "node:path";
import { cgroupDirectory, detectCgroupLayout, hierarchyKey, readOwnCgroups } from "./cgroup-layout.js";
import { removeJobDirectories } from "./remove-job-directories.js";

async function pidsIn(directory: string): Promise<number[]> {
  try {
    return (await readFile(join(directory, "cgroup.procs"), "utf8"))
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map(Number);
  } catch {
    return [];
  }
}

/**
 * What a killed host agent's attempts left behind: their cgroups (every process in them
 * killed, then the directory removed, in every hierarchy) and their job directories. A
 * host agent runs this when it starts, before it claims anything: no attempt of this host
 * can be live then, and the control plane has already handed (or will hand) those
 * attempts to the queue once their leases expire.
 *
 * Only this host's own leftovers: an attempt's cgroups are named like its directory in the
 * host's work root (made before the cgroup), or that name and a suffix, so exactly those are reaped. Other
 * agents on the machine share the cgroup parent and must keep their live attempts.
 * Returns what it removed.
 */
export async function reapStaleAttempts(options: {
  workRoot: string;
  /** The host's scratch root (workspaces and homes), when it has one: its leftovers go too. */
  scratchRoot?: string;
  cgroupParentName?: string;
}): Promise<string[]> {
  const parentName = options.cgroupParentName ?? "kiln";
  const removed: string[] = [];
  const { scratchRoot } = options;
  if (scratchRoot !== undefined) {
    const scratch = (await readdir(scratchRoot).catch(() => [])).map((e) => join(scratchRoot, e));
    await removeJobDirectories(scratch);
    removed.push(...scratch);
  }
  let leftovers: string[];
  try {
    leftovers = await readdir(options.workRoot);
  } catch {
    return removed; // No work root yet: nothing was left behind.
  }
  if (leftovers.length === 0) return removed;
  const layout = await detectCgroupLayout();
  const own = await readOwnCgroups();
  for (const hierarchy of [...layout.v1, ...(layout.unified === null ? [] : [layout.unified])]) {
    const parent = join(cgroupDirectory(hierarchy, own.get(hierarchyKey(hierarchy)) ?? "/"), parentName);
    let children: string[];
    try {
      children = (await readdir(parent, { withFileTypes: true }))
        // The attempt's own cgroup, and those named after it (`-lock`: its lockfile's sandbox;
        // `-fetch`: its dependency-gateway worker).
        .filter((d) => d.isDirectory() && leftovers.some((l) => d.name === l || d.name.startsWith(`${l}-`)))
        .map((d) => d.name);
    } catch {
      continue;
    }
    for (const child of children) {
      const directory = join(parent, child);
      for (let round = 0; round < 50; round++) {
        const pids = await pidsIn(directory);
        if (pids.length === 0) break;
        for (const pid of pids) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // Already gone.
          }
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      try {
        await rmdir(directory);
        removed.push(directory);
      } catch {
        // Still busy (a process in uninterruptible sleep); the next start tries again.
      }
    }
  }
  await removeJobDirectories(leftovers.map((e) => join(options.workRoot, e)));
  removed.push(...leftovers.map((e) => join(options.workRoot, e)));
  return removed;
}
