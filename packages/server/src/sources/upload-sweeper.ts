import { type Clock, cleanupExpiredUploads, type Storage } from "@kiln/storage";

/**
 * Periodically cleans up uploads that expired unclaimed, which is when their bytes stop
 * counting toward the tenant's reservations. Any server process may run it: each cleanup is a
 * conditional write (see storage's cleanup-expired-uploads.ts).
 */
export function startUploadSweeper(deps: { storage: Storage; clock: Clock }, everyMs = 60_000) {
  const timer = setInterval(() => {
    void cleanupExpiredUploads(deps.storage, deps.clock.now()).catch(() => undefined);
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
