import { type Kysely, type Selectable, sql } from "kysely";
import type { Storage } from "../dialect.js";
import type { Database, JobEventsTable } from "../schema.js";

export type JobEventRow = Selectable<JobEventsTable>;

/**
 * Runs `fn` at a point where every job event whose sequence is visible is also preceded
 * by every event with a smaller sequence that will ever commit.
 *
 * Sequences are allocated when an event is inserted, not when its transaction commits.
 * With one writer at a time (SQLite) allocation order is commit order, so a plain read
 * is enough. On PostgreSQL two transactions may commit in the opposite order of their
 * sequences, and a reader that saw 11 before 10 committed would resume past 10 for
 * ever. There the read takes a SHARE lock on job_events first: it waits for every
 * transaction that has inserted an event (they hold ROW EXCLUSIVE) to end, and holds
 * back new inserts for the length of one SELECT. Readers do not block one another.
 */
async function atCommittedHorizon<T>(storage: Storage, fn: (db: Kysely<Database>) => Promise<T>): Promise<T> {
  if (storage.capabilities.singleWriter) return fn(storage.db);
  return storage.transaction(async (trx) => {
    await sql`LOCK TABLE job_events IN SHARE MODE`.execute(trx);
    return fn(trx);
  });
}

/**
 * The tenant's job events with a sequence greater than `afterSequence`, in sequence
 * order: the durable feed cli.events and the dashboard stream resume from. Resuming
 * from the last sequence delivered never skips an event that commits later (see
 * atCommittedHorizon) and never repeats one.
 */
export async function readJobEvents(
  storage: Storage,
  input: { tenantId: string; afterSequence: number; limit: number },
): Promise<JobEventRow[]> {
  return atCommittedHorizon(storage, (db) =>
    db
      .selectFrom("job_events")
      .selectAll()
      .where("tenant_id", "=", input.tenantId)
      .where("sequence", ">", input.afterSequence)
      .orderBy("sequence")
      .limit(input.limit)
      .execute(),
  );
}

/** The highest job event sequence committed so far (every tenant's); 0 when none. */
export async function latestJobEventSequence(storage: Storage): Promise<number> {
  return atCommittedHorizon(storage, async (db) => {
    const top = await db
      .selectFrom("job_events")
      .select((eb) => eb.fn.max("sequence").as("sequence"))
      .executeTakeFirst();
    return Number(top?.sequence ?? 0);
  });
}
