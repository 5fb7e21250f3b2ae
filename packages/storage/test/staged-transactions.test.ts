import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sql } from "kysely";
import type { Storage } from "../src/index.js";
import { DIALECTS } from "./dialects.js";
import { blockedOrSettled, deferred, withTwoStorages } from "./staged-transactions.js";

/**
 * The race verdict the ordering tests rest on (staged-transactions.ts): on PostgreSQL a statement
 * is "pending" only while it waits for a lock a backend of its own database holds. A gate failed
 * because a move waited a moment for another test database's commit (the cluster's one NOTIFY
 * queue lock). Both are staged here with a shared catalog, whose lock spans the databases.
 */
const SHARED_CATALOG = sql`pg_catalog.pg_shdescription`;

/** Holds `storage`'s transaction with the shared catalog locked until `release()`. */
function lockSharedCatalog(storage: Storage): { locked: Promise<void>; release: () => void; done: Promise<void> } {
  const locked = deferred();
  const gate = deferred();
  const done = storage.transaction(async (trx) => {
    await sql`lock table ${SHARED_CATALOG} in access exclusive mode`.execute(trx);
    locked.resolve();
    await gate.promise;
  });
  return { locked: locked.promise, release: gate.resolve, done };
}

/** Resolves once a backend of `probe`'s database waits on a lock. */
async function someoneWaits(probe: Storage): Promise<void> {
  for (;;) {
    const waiting = await sql<{ n: number }>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock'`.execute(probe.db);
    if ((waiting.rows[0]?.n ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

for (const dialect of DIALECTS) {
  describe(`a race's verdict [${dialect.name}]`, {
    skip: dialect.skip || (dialect.name === "sqlite" ? "no lock catalog: SQLite's verdict is the event loop's" : false),
  }, () => {
    it("is pending while a statement waits for a transaction of its own database", async () => {
      await withTwoStorages(dialect, async (main, other) => {
        const holder = lockSharedCatalog(main);
        await holder.locked;
        const reading = sql`select count(*) from ${SHARED_CATALOG}`.execute(other.db);
        try {
          assert.equal(await blockedOrSettled(other, reading), "pending");
        } finally {
          holder.release();
          await Promise.allSettled([holder.done, reading]);
        }
        await reading;
      });
    });

    it("is settled when the statement waited only for another database's transaction", async () => {
      const elsewhere = await dialect.createDatabase();
      const foreign = await elsewhere.open({ maxConnections: 1 });
      try {
        await withTwoStorages(dialect, async (main, other) => {
          const holder = lockSharedCatalog(foreign);
          await holder.locked;
          const reading = sql`select count(*) from ${SHARED_CATALOG}`.execute(other.db);
          try {
            const verdict = blockedOrSettled(main, reading);
            // The wait is real and visible in this database; the verdict must not take it for the
            // race's, so it holds out until the foreign transaction ends and the read settles. The
            // pause lets it look many times first (it looks every few ms): however long it is, the
            // right verdict is "settled", so only a wrong helper's failure depends on it.
            await someoneWaits(main);
            await new Promise((resolve) => setTimeout(resolve, 250));
            holder.release();
            assert.equal(await verdict, "settled");
          } finally {
            holder.release();
            await Promise.allSettled([holder.done, reading]);
          }
          await reading;
        });
      } finally {
        await foreign.close();
        await elsewhere.dispose();
      }
    });
  });
}
