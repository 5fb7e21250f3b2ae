import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import { cleanupExpiredUploads, removeStaleStagedBlobs, type Storage } from "@kiln/storage";

/** A staging file this much older than now belongs to no live request (Node cuts requests off at 5 minutes). */
const STALE_STAGING_MS = 60 * 60 * 1000;

/**
 * Cleans up uploads that expired unclaimed, which is when their bytes stop counting toward the
 * tenant's reservations, every `everyMs` on the clock. Any server process may run it: each
 * cleanup is a conditional write (see storage's cleanup-expired-uploads.ts). A failed pass is
 * logged and emitted; the next pass tries again. With a `stagingDirectory` (the blob store's)
 * it also removes the staging files of parts a killed process was receiving (staged-blob.ts).
 */
export function startUploadSweeper(
  deps: {
    storage: Storage;
    clock: Clock;
    log: Logger;
    stagingDirectory?: string;
    onFailure?: (failure: LoopFailure) => void;
  },
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
      if (deps.stagingDirectory !== undefined) {
        const removed = await removeStaleStagedBlobs(
          deps.stagingDirectory,
          new Date(deps.clock.now().getTime() - STALE_STAGING_MS),
        );
        if (removed > 0) deps.log.info({ removed }, "removed staging files of parts no process is receiving");
      }
    },
  });
}
