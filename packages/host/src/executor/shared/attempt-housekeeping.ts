import type { Clock } from "@kiln/contract";
import type { HostIsolation } from "../host-isolation.js";
import { attemptReaper } from "./reap-attempt.js";
import { reapStaleAttempts } from "./reap-stale-attempts.js";
import { removeJobDirectories } from "./remove-job-directories.js";

/**
 * The host-side housekeeping both isolations share: an attempt's processes live in a cgroup
 * named after the attempt (the sandbox's job, the microVM's QEMU) under one parent, and its
 * directories are named after it in the work and scratch roots, so removal and reaping are the
 * same code whichever isolation made them.
 */
export function attemptHousekeeping(
  cgroupParentName: string,
  clock: Clock,
): Pick<HostIsolation, "removeDirectories" | "reapStale" | "reaper"> {
  return {
    removeDirectories: removeJobDirectories,
    reapStale: (where) => reapStaleAttempts({ ...where, cgroupParentName }),
    reaper: (where) => attemptReaper({ ...where, cgroupParentName, clock }),
  };
}
