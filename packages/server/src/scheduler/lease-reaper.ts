import { type Clock, reclaimExpiredLeases, type Storage } from "@kiln/storage";

/**
 * Periodically records attempts whose host stopped renewing as lost and hands their
 * jobs back to the queue (or fails them once attempts are exhausted). Any server
 * process may run it: the reclaim is conditional on the expired lease.
 */
export function startLeaseReaper(deps: { storage: Storage; clock: Clock; onReclaimed?: () => void }, everyMs = 3000) {
  const timer = setInterval(() => {
    void reclaimExpiredLeases(deps.storage, deps.clock.now()).then(
      (reclaimed) => {
        if (reclaimed.length > 0) deps.onReclaimed?.();
      },
      () => undefined,
    );
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
