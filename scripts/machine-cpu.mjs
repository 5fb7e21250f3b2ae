// The whole machine's CPU time since boot, from /proc/stat's first line: what the gate's closing
// line (run-tests.mjs) and the benches (bench/end-to-end.mjs, bench/inner-loop.mjs) set their own
// numbers against, since on a shared 2-core machine the one follows the other.
import { readFileSync } from "node:fs";

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
