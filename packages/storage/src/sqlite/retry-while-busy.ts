import { setTimeout as sleep } from "node:timers/promises";

/**
 * How long one statement may wait for another connection's write lock: the budget
 * `PRAGMA busy_timeout = 5000` would give, spent asynchronously (see below).
 */
export const BUSY_TIMEOUT_MS = 5000;

/** Back-off between attempts, in milliseconds; the last value repeats. Mirrors SQLite's own busy handler. */
const BACKOFF_MS = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100] as const;

/**
 * Runs `attempt` until it does not fail with SQLITE_BUSY, sleeping asynchronously between tries.
 *
 * Why not SQLite's own busy handler (`PRAGMA busy_timeout`)? better-sqlite3 is synchronous, so the
 * built-in handler sleeps inside the call and freezes the event loop. Worse, when the lock holder
 * is another connection in this same process (a second `Storage` over the same file — tests do
 * this, and so does an in-process admin command), the holder can never run while we sleep, so
 * the wait always ends in SQLITE_BUSY. Waiting here, between attempts, lets the holder finish.
 *
 * Only call this where SQLITE_BUSY means "nothing happened": an autocommit statement or the
 * `BEGIN IMMEDIATE` that opens a transaction. Inside a transaction a retry would be wrong (the
 * transaction's earlier reads may be stale), so the driver does not retry there.
 */
export async function retryWhileBusy<T>(attempt: () => T, timeoutMs: number = BUSY_TIMEOUT_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let tries = 0; ; tries++) {
    try {
      return attempt();
    } catch (error) {
      if (!isBusyError(error) || Date.now() >= deadline) {
        throw error;
      }
    }
    const backoff = BACKOFF_MS[Math.min(tries, BACKOFF_MS.length - 1)] ?? 100;
    await sleep(Math.min(backoff, Math.max(0, deadline - Date.now())));
  }
}

/** SQLITE_BUSY and its extended codes (SQLITE_BUSY_RECOVERY, SQLITE_BUSY_SNAPSHOT, …). */
export function isBusyError(error: unknown): boolean {
  return (
    error instanceof Error && "code" in error && typeof error.code === "string" && error.code.startsWith("SQLITE_BUSY")
  );
}
