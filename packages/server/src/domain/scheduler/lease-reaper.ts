import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import { reclaimExpiredLeases, type Storage } from "@kiln/storage";

/**
 * Records attempts whose host stopped renewing as lost and hands their jobs back to the queue
 * (or fails them once attempts are exhausted), every `everyMs` on the clock. Any server process
 * may run it: the reclaim is conditional on the expired lease. A failed pass is logged and
 * emitted; the next pass tries again.
 */
export function startLeaseReaper(
  deps: {
    storage: Storage;
    clock: Clock;
    log: Logger;
    onReclaimed?: (reclaimed: readonly { jobId: string; attempt: number }[]) => void;
    onFailure?: (failure: LoopFailure) => void;
  },
  everyMs = 3000,
): PeriodicLoop {
  return startPeriodicLoop({
    name: "lease reaper",
    clock: deps.clock,
    everyMs,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: async () => {
      const reclaimed = await reclaimExpiredLeases(deps.storage, deps.clock.now());
      if (reclaimed.length === 0) return;
      deps.log.warn({ reclaimed }, `lease reaper: ${reclaimed.length} attempt(s) lost with their host`);
      deps.onReclaimed?.(reclaimed);
    },
  });
}
