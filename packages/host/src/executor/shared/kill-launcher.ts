import type { ChildProcess } from "node:child_process";
import { readFile } from "node:fs/promises";

/**
 * Kills the launcher, pid 1 of the attempt's pid namespace (the child of
 * `unshare --pid --fork --kill-child`): the kernel then kills every process in the namespace,
 * and unshare reports its exit once they are all gone — so when unshare has exited, no process
 * of the attempt exists, not even one still being reaped. This also ends a launcher that has not
 * joined its cgroup yet, which a kill of the cgroup alone would miss. Before unshare has forked
 * it, unshare itself is killed (its --kill-child then takes the launcher down as it starts).
 * Both executors start their attempts this way (the sandbox's bwrap, the microVM's QEMU).
 *
 * `relays`: how many single-child processes stand between the spawned one and unshare (the
 * sandbox's output relay: 1; the microVM spawns unshare itself: 0). A relay that has not forked
 * yet is killed itself; its child dies with it by its parent-death signal.
 */
export async function killLauncher(child: ChildProcess, relays = 0): Promise<void> {
  const pid = child.pid;
  if (pid === undefined) return;
  await killBelow(pid, relays, () => child.kill("SIGKILL"));
}

async function killBelow(pid: number, relays: number, killItself: () => void): Promise<void> {
  const children = await childrenOf(pid);
  if (children.length === 0) killItself();
  for (const below of children) {
    if (relays === 0) killPid(below);
    else await killBelow(below, relays - 1, () => killPid(below));
  }
}

/** The pids of a process's children (none once it is gone). */
async function childrenOf(pid: number): Promise<number[]> {
  return (await readFile(`/proc/${pid}/task/${pid}/children`, "utf8").catch(() => ""))
    .split(/\s+/)
    .filter((p) => p !== "")
    .map(Number);
}

function killPid(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}
