/**
 * What stands in for cgroup limits on a machine where cgroups cannot be written: rlimits set
 * with prlimit(1) on the launcher, inherited by everything it starts. They are weaker and the
 * evidence says so, rather than the attempt silently running unlimited:
 * - memory: RLIMIT_AS bounds each process's address space, not the attempt's total;
 * - pids: RLIMIT_NPROC counts every process of the sandbox uid on the host (all attempts share it);
 * - cpu: there is no rlimit for a CPU *rate* (RLIMIT_CPU caps total seconds), so the vCPU quota is
 *   not enforced; the wall-clock ceiling still bounds the attempt.
 */

import type { ResourceLimits } from "../executor.js";
import type { EnforcedLimits } from "../shared/attempt-cgroup.js";

export interface RlimitFallback {
  /** prlimit options (without the program and `--`), empty when nothing needs a fallback. */
  readonly prlimitOptions: readonly string[];
  readonly detail: readonly string[];
}

export function rlimitFallback(limits: ResourceLimits, enforcedByCgroup: EnforcedLimits): RlimitFallback {
  const options: string[] = [];
  const detail: string[] = [];
  if (!enforcedByCgroup.memory) {
    options.push(`--as=${limits.memoryBytes}:${limits.memoryBytes}`);
    detail.push(
      `memory: not enforced by a cgroup; fallback RLIMIT_AS = ${limits.memoryBytes} bytes per process (not per attempt)`,
    );
  }
  if (!enforcedByCgroup.pids) {
    options.push(`--nproc=${limits.pids}:${limits.pids}`);
    detail.push(
      `pids: not enforced by a cgroup; fallback RLIMIT_NPROC = ${limits.pids} (counted per sandbox uid across the host)`,
    );
  }
  if (!enforcedByCgroup.cpu) {
    detail.push(`cpu: not enforced (${limits.vcpus} vCPU requested); no rlimit expresses a CPU rate`);
  }
  return { prlimitOptions: options, detail };
}
