import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import { cleanupExpiredUploads, type Storage } from "@kiln/storage";

/**
 * Cleans up uploads that expired unclaimed, which is when their bytes stop counting toward the
 * tenant's reservations, every `everyMs` on the clock. Any server process may run it: each
 * cleanup is a conditional write (see storage's cleanup-expired-uploads.ts). A failed pass is
 * logged and emitted; the next pass tries again.
 */
export function startUploadSweeper(
  deps: { storage: Storage; clock: Clock; log: Logger; onFailure?: (failure: LoopFailure) => void },
  everyMs = 60_000,
): PeriodicLoop {
  return startPeriodicLoop({
    name: "upload sweeper",
    clock: deps.clock,
    everyMs,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: async () => {
      await cleanupExpiredUploads(deps.storage, deps.clock.now());
    },
  });
}
