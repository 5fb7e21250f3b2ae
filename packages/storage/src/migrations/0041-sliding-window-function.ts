import { type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";

/**
 * `admit_request_in_sliding_window(bucket, current_second, oldest_second, limit)` on PostgreSQL:
 * the sliding-window admission of rate-limits/admit-request-in-sliding-window.ts as one function,
 * so an agent credential's request costs the database one round trip instead of seven (BEGIN, SET
 * LOCAL, insert, delete, locking read, update, COMMIT). Every round trip of every request waits
 * for a backend to be scheduled, and on a machine of few cores shared with another tenant's
 * writes those waits were the quiet tenant's tail latency (reliability trial T15).
 *
 * The statements and their locking are the verb's, in its order: a PL/pgSQL function called
 * alone runs in one transaction of its own, and each statement in it takes a fresh snapshot at
 * READ COMMITTED, so the current second's row inserted (or waited for) by the first statement is
 * seen and locked by the locking read, and a second request of the bucket waits there until the
 * first commits, then reads its count. `set_config(…, true)` lasts until that transaction's
 * commit, which it makes asynchronous (the verb's relaxed durability). A `SET` clause on the
 * function would not: it is undone when the function returns, before the commit.
 *
 * It answers whether the request was admitted and the counted seconds it read (before its own
 * count), oldest first, from which the verb derives reset_at. SQLite keeps the verb's
 * transaction: its single writer orders it, and a round trip there is a function call.
 */
export function slidingWindowFunction(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      if (dialect !== "postgres") return;
      await sql`
        create function admit_request_in_sliding_window(
          p_bucket text, p_current text, p_oldest text, p_limit bigint,
          out admitted boolean, out window_starts text[], out counts bigint[]
        ) language plpgsql as $$
        declare
          total bigint;
        begin
          perform set_config('synchronous_commit', 'off', true);
          insert into rate_windows (bucket, window_start, count) values (p_bucket, p_current, 0)
            on conflict (bucket, window_start) do nothing;
          -- The bucket's seconds that can no longer count go as it is used.
          delete from rate_windows w where w.bucket = p_bucket and w.window_start < p_oldest;
          select coalesce(array_agg(locked.window_start order by locked.window_start), '{}'),
                 coalesce(array_agg(locked.count::bigint order by locked.window_start), '{}'),
                 coalesce(sum(locked.count), 0)
            into window_starts, counts, total
            from (
              select w.window_start, w.count from rate_windows w
               where w.bucket = p_bucket and w.window_start >= p_oldest and w.window_start <= p_current
               order by w.window_start
               for update
            ) locked;
          admitted := total < p_limit;
          if admitted then
            update rate_windows w set count = w.count + 1
             where w.bucket = p_bucket and w.window_start = p_current;
          end if;
        end;
        $$
      `.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      if (dialect !== "postgres") return;
      await sql`drop function admit_request_in_sliding_window(text, text, text, bigint)`.execute(db);
    },
  };
}
