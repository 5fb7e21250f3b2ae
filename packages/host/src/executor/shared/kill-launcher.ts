import type { ChildProcess } from "node:child_process";
import { readFile } from "node:fs/promises";

/**
 * Kills the launcher, pid 1 of the attempt's pid namespace (the child of the spawned
 * `unshare --pid --fork --kill-child`): the kernel then kills every process in the namespace,
 * and unshare reports its exit once they are all gone — so when the spawned process has exited,
 * no process of the attempt exists, not even one still being reaped. This also ends a launcher
 * that has not joined its cgroup yet, which a kill of the cgroup alone would miss. Before unshare
 * has forked it, unshare itself is killed (its --kill-child then takes the launcher down as it
 * starts). Both executors start their attempts this way (the sandbox's bwrap, the microVM's QEMU).
 */
export async function killLauncher(child: ChildProcess): Promise<void> {
  const pid = child.pid;
  if (pid === undefined) return;
  const children = (await readFile(`/proc/${pid}/task/${pid}/children`, "utf8").catch(() => ""))
    .split(/\s+/)
    .filter((p) => p !== "")
    .map(Number);
  if (children.length === 0) child.kill("SIGKILL");
  for (const launcher of children) {
    try {
      process.kill(launcher, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}
