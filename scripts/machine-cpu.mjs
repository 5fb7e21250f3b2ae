// The whole machine's CPU time since boot, from /proc/stat's first line: what the gate's closing
// line (run-tests.mjs) and the benches (bench/end-to-end.mjs, bench/inner-loop.mjs) set their own
// numbers against, since on a shared 2-core machine the one follows the other.
import { readdirSync, readFileSync } from "node:fs";

/**
 * Clock ticks (100 per second on Linux) all cores spent busy (user, nice, system, irq, softirq,
 * steal) and idle (idle and iowait) since boot.
 * @returns {{ busy: number, idle: number }}
 */
export function machineCpuTicks() {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync("/proc/stat", "utf8")
    .split("\n")[0]
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return { busy: user + nice + system + irq + softirq + steal, idle: idle + iowait };
}

/**
 * Clock ticks a process and every process under it have spent (user and system): its own, its
 * waited-for children's (which the kernel adds to it as it reaps them), and those still running.
 * 0 when it is gone. What the gate's closing line splits the machine's busy CPU by.
 * @param {number} pid
 */
export function processTreeTicks(pid) {
  const stats = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The fields after the command's closing parenthesis: state, ppid, … utime (12th), stime,
      // cutime, cstime.
      const fields = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ").at(-1).split(" ");
      stats.set(Number(entry), { ppid: Number(fields[1]), ticks: fields.slice(11, 15).map(Number) });
    } catch {
      // Gone between listing and reading.
    }
  }
  const children = new Map();
  for (const [child, { ppid }] of stats) children.set(ppid, [...(children.get(ppid) ?? []), child]);
  const root = stats.get(pid);
  if (root === undefined) return 0;
  let total = root.ticks.reduce((a, b) => a + b, 0);
  const below = [...(children.get(pid) ?? [])];
  while (below.length > 0) {
    const next = below.pop();
    total += stats.get(next).ticks.reduce((a, b) => a + b, 0);
    below.push(...(children.get(next) ?? []));
  }
  return total;
}
