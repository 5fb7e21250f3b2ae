import { readFile, rmdir, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Clock } from "@kiln/contract";
import { cgroupDirectory, detectCgroupLayout, hierarchyKey, readOwnCgroups } from "./cgroup-layout.js";
import { removeJobDirectories } from "./remove-job-directories.js";

/** One entry of a reap receipt. */
export interface ReapEntry {
  readonly kind: string;
  readonly detail: string;
  readonly at: string;
}

/** Reaps what one attempt left on this host (its isolation's processes, cgroup, directories); the control plane asked for it by attempt id. */
export interface AttemptReaper {
  reap(attemptId: string): Promise<ReapEntry[]>;
}

/** An attempt id as hosts name attempts (`<job>-a<n>`): nothing else is ever removed. */
const ATTEMPT_ID = /^[A-Za-z0-9_.-]{1,200}-a[1-9][0-9]{0,8}$/;

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * The real reaper: every process in the attempt's cgroup killed (`cgroup.kill` where the kernel
 * has it, else SIGKILL to each pid until none is left) and the cgroup removed, in every
 * hierarchy, then the attempt's directories in the work root and scratch root removed. Only the
 * named attempt's: the cgroup is `<parent>/<attempt id>` under this agent's own cgroup, and the
 * directories are named by the attempt id, as both executors make them (the sandbox's cgroup
 * holds the job's processes, the microVM's holds QEMU).
 */
export function attemptReaper(options: {
  readonly workRoot: string;
  readonly scratchRoot?: string;
  readonly cgroupParentName?: string;
  readonly clock: Clock;
}): AttemptReaper {
  const parentName = options.cgroupParentName ?? "kiln";
  return {
    async reap(attemptId) {
      if (!ATTEMPT_ID.test(attemptId)) throw new Error(`${JSON.stringify(attemptId)} is not an attempt id`);
      const entries: ReapEntry[] = [];
      const note = (kind: string, detail: string) =>
        entries.push({ kind, detail, at: options.clock.now().toISOString() });
      const layout = await detectCgroupLayout();
      const own = await readOwnCgroups();
      for (const hierarchy of [...layout.v1, ...(layout.unified === null ? [] : [layout.unified])]) {
        const directory = join(
          cgroupDirectory(hierarchy, own.get(hierarchyKey(hierarchy)) ?? "/"),
          parentName,
          attemptId,
        );
        if (!(await exists(directory))) continue;
        const killed = await killAll(directory);
        await rmdir(directory);
        note("cgroup_removed", `${directory}${killed > 0 ? ` (${killed} process(es) killed)` : ""}`);
      }
      const directories = [
        join(options.workRoot, attemptId),
        ...(options.scratchRoot === undefined ? [] : [join(options.scratchRoot, attemptId)]),
      ];
      for (const directory of directories) {
        if (!(await exists(directory))) continue;
        await removeJobDirectories([directory]);
        note("directory_removed", directory);
      }
      if (entries.length === 0) note("nothing_left", `no cgroup or directory of ${attemptId} is left on this host`);
      return entries;
    },
  };
}

/** Kills every process of a cgroup; returns how many it signalled. */
async function killAll(directory: string): Promise<number> {
  const pidsOf = async () =>
    ((await readFile(join(directory, "cgroup.procs"), "utf8").catch(() => "")) as string)
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map(Number);
  let signalled = 0;
  if (await exists(join(directory, "cgroup.kill"))) {
    signalled = (await pidsOf()).length;
    await writeFile(join(directory, "cgroup.kill"), "1");
  }
  // Killed processes leave the cgroup once the kernel has reaped them; wait for that (bounded).
  for (let round = 0; round < 250; round++) {
    const pids = await pidsOf();
    if (pids.length === 0) return signalled;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
        signalled += 1;
      } catch {
        // Already gone.
      }
    }
    await sleep(20);
  }
  throw new Error(`processes of ${directory} did not exit after SIGKILL`);
}
