import { countRequestInWindow, type Storage } from "@kiln/storage";
import { refuse } from "../http/refusal.js";

const WINDOW_SECONDS = 60;

/**
 * Fixed one-minute windows counted in the database, so every server process sharing it
 * enforces one limit. Past the limit: rate_limited naming reset_at (the window's end)
 * with retry_after_seconds (sent as Retry-After).
 */
export async function enforceRateLimit(
  storage: Storage,
  input: { bucket: string; limit: number; now: Date; what: string },
): Promise<void> {
  const windowMs = WINDOW_SECONDS * 1000;
  const windowStart = new Date(Math.floor(input.now.getTime() / windowMs) * windowMs);
  const count = await countRequestInWindow(storage, { bucket: input.bucket, windowStart });
  if (count <= input.limit) return;
  const resetAt = new Date(windowStart.getTime() + windowMs);
  refuse("rate_limited", `${input.what} allows ${input.limit} requests per minute`, {
    reset_at: resetAt.toISOString(),
    retry_after_seconds: Math.max(1, Math.ceil((resetAt.getTime() - input.now.getTime()) / 1000)),
  });
}
