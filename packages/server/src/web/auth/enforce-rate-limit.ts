import { admitRequestInSlidingWindow, type Storage } from "@kiln/storage";
import { refuse } from "../../domain/refusal.js";

const WINDOW_SECONDS = 60;

/**
 * At most `limit` requests in any 60 seconds — a sliding window, not calendar minutes (across
 * whose boundary twice the limit would pass) — counted in the database, so every server process
 * sharing it enforces one limit (storage `admitRequestInSlidingWindow`). Past the limit:
 * rate_limited naming reset_at (when the oldest counted requests have left the window) with
 * retry_after_seconds (sent as Retry-After).
 */
export async function enforceRateLimit(
  storage: Storage,
  input: { bucket: string; limit: number; now: Date; what: string },
): Promise<void> {
  const answer = await admitRequestInSlidingWindow(storage, {
    bucket: input.bucket,
    now: input.now,
    windowSeconds: WINDOW_SECONDS,
    limit: input.limit,
  });
  if (answer.admitted) return;
  refuse("rate_limited", `${input.what} allows ${input.limit} requests in any ${WINDOW_SECONDS} seconds`, {
    reset_at: answer.resetAt.toISOString(),
    retry_after_seconds: Math.max(1, Math.ceil((answer.resetAt.getTime() - input.now.getTime()) / 1000)),
  });
}
