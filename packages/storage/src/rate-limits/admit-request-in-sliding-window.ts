import { type Kysely, sql } from "kysely";
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
 * bucket are counted one after the other. On PostgreSQL the transaction is one call of a
 * function (migration 0041), so a request costs one round trip rather than seven.
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
  const window = { bucket: input.bucket, current, oldest, limit: input.limit };
  const read =
    storage.dialect === "postgres" ? await admitInOneCall(storage, window) : await admitInTransaction(storage, window);
  const count = read.seconds.reduce((n, s) => n + s.count, 0);
  if (read.admitted) return { admitted: true, count: count + 1 };
  // A second's requests leave the window windowSeconds + 1 seconds after it began.
  let remaining = count;
  let resetAt = new Date(second + 1000);
  for (const row of read.seconds) {
    remaining -= row.count;
    resetAt = new Date(new Date(row.windowStart).getTime() + (input.windowSeconds + 1) * 1000);
    if (remaining < input.limit) break;
  }
  return { admitted: false, count, resetAt };
}

interface WindowToAdmit {
  readonly bucket: string;
  /** The current second and the oldest second that may overlap the window ending now. */
  readonly current: string;
  readonly oldest: string;
  readonly limit: number;
}

/** Whether the request was admitted, and the seconds counted before it, oldest first. */
interface WindowRead {
  readonly admitted: boolean;
  readonly seconds: readonly { readonly windowStart: string; readonly count: number }[];
}

/**
 * PostgreSQL: the same statements, in the same order, as `admitInTransaction`, in the function
 * of migration 0041 — one round trip. Its locking argument is the one above; the migration says
 * why it holds inside a function.
 */
async function admitInOneCall(storage: Storage, w: WindowToAdmit): Promise<WindowRead> {
  const result = await sql<{ admitted: boolean; window_starts: string[]; counts: (string | number)[] }>`
    select admitted, window_starts, counts
      from admit_request_in_sliding_window(${w.bucket}, ${w.current}, ${w.oldest}, ${w.limit})
  `.execute(storage.db);
  const row = result.rows[0];
  if (row === undefined) throw new Error("admit_request_in_sliding_window answered no row");
  return {
    admitted: row.admitted,
    seconds: row.window_starts.map((windowStart, i) => ({ windowStart, count: Number(row.counts[i]) })),
  };
}

async function admitInTransaction(storage: Storage, w: WindowToAdmit): Promise<WindowRead> {
  return storage.transaction(async (trx: Kysely<Database>) => {
    await trx
      .insertInto("rate_windows")
      .values({ bucket: w.bucket, window_start: w.current, count: 0 })
      .onConflict((c) => c.columns(["bucket", "window_start"]).doNothing())
      .execute();
    // The bucket's seconds that can no longer count go as it is used (at most windowSeconds + 1 rows stay).
    await trx.deleteFrom("rate_windows").where("bucket", "=", w.bucket).where("window_start", "<", w.oldest).execute();
    let query = trx
      .selectFrom("rate_windows")
      .select(["window_start", "count"])
      .where("bucket", "=", w.bucket)
      .where("window_start", ">=", w.oldest)
      .where("window_start", "<=", w.current)
      .orderBy("window_start");
    if (storage.capabilities.rowLocks) query = query.forUpdate();
    const rows = await query.execute();
    const admitted = rows.reduce((n, row) => n + Number(row.count), 0) < w.limit;
    if (admitted) {
      await trx
        .updateTable("rate_windows")
        .set((eb) => ({ count: eb("count", "+", 1) }))
        .where("bucket", "=", w.bucket)
        .where("window_start", "=", w.current)
        .execute();
    }
    return { admitted, seconds: rows.map((row) => ({ windowStart: row.window_start, count: Number(row.count) })) };
  }, RELAXED);
}

const RELAXED = { durability: "relaxed" } as const;
