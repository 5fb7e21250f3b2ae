import type { Kysely } from "kysely";
import type { Storage } from "../dialect.js";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

export type SlidingWindowAnswer =
  | { readonly admitted: true; readonly count: number }
  | {
      readonly admitted: false;
      readonly count: number;
      /** When the oldest admitted requests will have left the window enough to admit one more. */
      readonly resetAt: Date;
    };

/**
 * Admits a request under a limit of `limit` per `windowSeconds` that holds over every window of
 * that length, not per calendar window (where 2× the limit passes across a boundary). Admitted
 * requests are counted per whole second in `rate_windows` (one row per bucket and second); a
 * request is admitted while the seconds that may overlap the window ending now (the current one
 * and the `windowSeconds` before it, so a partly covered second counts whole) hold fewer than
 * `limit`, so any `windowSeconds` window holds at most `limit` admitted requests. Refused
 * requests are not counted: a client over its limit still gets its limit's worth.
 *
 * One transaction, so several server processes sharing the database share one limit: on SQLite
 * the write lock serializes it; on PostgreSQL the bucket's current-second row (inserted first if
 * absent) and every counted row are locked before the count is read, so two requests of one
 * bucket are counted one after the other.
 *
 * Relaxed durability: a count lost to a power failure (never to a process crash) only lets that
 * credential's next few requests through uncounted. A durable commit is an fsync on the event
 * loop for every request of every agent credential, refused ones included — a flood of them,
 * beside another tenant filling the disk, held every tenant's requests behind those fsyncs
 * (reliability trial T15: 2,157 commits, 1,900 of them such counts, took 20 s of a 70 s run).
 */
export async function admitRequestInSlidingWindow(
  storage: Storage,
  input: { bucket: string; now: Date; windowSeconds: number; limit: number },
): Promise<SlidingWindowAnswer> {
  const second = Math.floor(input.now.getTime() / 1000) * 1000;
  const current = formatTimestamp(new Date(second));
  const oldest = formatTimestamp(new Date(second - input.windowSeconds * 1000));
  return storage.transaction(async (trx: Kysely<Database>) => {
    await trx
      .insertInto("rate_windows")
      .values({ bucket: input.bucket, window_start: current, count: 0 })
      .onConflict((c) => c.columns(["bucket", "window_start"]).doNothing())
      .execute();
    // The bucket's seconds that can no longer count go as it is used (at most windowSeconds + 1 rows stay).
    await trx
      .deleteFrom("rate_windows")
      .where("bucket", "=", input.bucket)
      .where("window_start", "<", oldest)
      .execute();
    let query = trx
      .selectFrom("rate_windows")
      .select(["window_start", "count"])
      .where("bucket", "=", input.bucket)
      .where("window_start", ">=", oldest)
      .where("window_start", "<=", current)
      .orderBy("window_start");
    if (storage.capabilities.rowLocks) query = query.forUpdate();
    const rows = await query.execute();
    const count = rows.reduce((n, row) => n + Number(row.count), 0);
    if (count < input.limit) {
      await trx
        .updateTable("rate_windows")
        .set((eb) => ({ count: eb("count", "+", 1) }))
        .where("bucket", "=", input.bucket)
        .where("window_start", "=", current)
        .execute();
      return { admitted: true, count: count + 1 };
    }
    // A second's requests leave the window windowSeconds + 1 seconds after it began.
    let remaining = count;
    let resetAt = new Date(second + 1000);
    for (const row of rows) {
      remaining -= Number(row.count);
      resetAt = new Date(new Date(row.window_start).getTime() + (input.windowSeconds + 1) * 1000);
      if (remaining < input.limit) break;
    }
    return { admitted: false, count, resetAt };
  }, RELAXED);
}

const RELAXED = { durability: "relaxed" } as const;
