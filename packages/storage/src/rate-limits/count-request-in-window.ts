import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Counts one request in the bucket's fixed window and returns the count including it.
 * One atomic upsert (INSERT … ON CONFLICT DO UPDATE … RETURNING, on both engines), so
 * several server processes sharing the database count into the same window exactly.
 */
export async function countRequestInWindow(
  target: StorageOrTransaction,
  input: { bucket: string; windowStart: Date },
): Promise<number> {
  const row = await executorOf(target)
    .insertInto("rate_windows")
    .values({ bucket: input.bucket, window_start: formatTimestamp(input.windowStart), count: 1 })
    .onConflict((c) => c.columns(["bucket", "window_start"]).doUpdateSet({ count: sql`rate_windows.count + 1` }))
    .returning("count")
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Drops windows that ended before `before`; they can no longer limit anything. */
export async function purgeRateWindows(target: StorageOrTransaction, before: Date): Promise<number> {
  const result = await executorOf(target)
    .deleteFrom("rate_windows")
    .where("window_start", "<", formatTimestamp(before))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
