import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { sql } from "kysely";
import { openStorage, type Storage } from "../src/index.js";
import { SQLITE_FILE_NAME } from "../src/sqlite/open-sqlite-storage.js";
import { flushWalFile, WalSync } from "../src/sqlite/wal-sync.js";

/** Flushes that complete only when the test releases them (while `holding`), counted. */
function heldFlushes() {
  const held: { resolve: () => void; reject: (error: Error) => void }[] = [];
  let started = 0;
  return {
    holding: true,
    flush(): Promise<void> {
      started += 1;
      if (!this.holding) return Promise.resolve();
      return new Promise<void>((resolve, reject) => held.push({ resolve, reject }));
    },
    releaseAll: () => {
      for (const waiter of held.splice(0)) waiter.resolve();
    },
    failAll: (error: Error) => {
      for (const waiter of held.splice(0)) waiter.reject(error);
    },
    get started() {
      return started;
    },
    get held() {
      return held.length;
    },
  };
}

/** Lets the event loop turn until `condition` holds: each step is an event-loop turn, not a duration. */
async function turnsUntil(condition: () => boolean, what: string): Promise<void> {
  for (let turn = 0; turn < 10_000; turn++) {
    if (condition()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.fail(`never: ${what}`);
}

function settledFlag(promise: Promise<unknown>) {
  const state = { settled: false };
  promise.then(
    () => {
      state.settled = true;
    },
    () => {
      state.settled = true;
    },
  );
  return state;
}

/** Some event-loop turns: long enough for any chain of promises and immediates without a flush. */
async function someTurns(): Promise<void> {
  for (let turn = 0; turn < 50; turn++) await new Promise((resolve) => setImmediate(resolve));
}

describe("WalSync: group commit", () => {
  it("a caller waits for a flush that started after it; callers during one flush share the next", async () => {
    const flushes = heldFlushes();
    const sync = new WalSync(() => flushes.flush());
    const first = sync.sync();
    assert.equal(flushes.started, 1);
    const during = [sync.sync(), sync.sync(), sync.sync()];
    const states = during.map(settledFlag);
    assert.equal(flushes.started, 1, "no second flush while one runs");
    flushes.releaseAll();
    await first;
    await turnsUntil(() => flushes.started === 2, "the batch's flush starts");
    assert.ok(
      states.every((s) => !s.settled),
      "the commits made during the first flush wait for the second",
    );
    flushes.releaseAll();
    await Promise.all(during);
    assert.equal(sync.flushes, 2);
  });

  it("a failed flush fails its batch, and the callers after it get a flush of their own", async () => {
    const flushes = heldFlushes();
    const sync = new WalSync(() => flushes.flush());
    const first = sync.sync();
    const second = sync.sync(); // during the first flush: the next batch
    flushes.failAll(new Error("EIO: the disk refused"));
    await assert.rejects(first, /EIO/);
    await turnsUntil(() => flushes.held === 1, "the next batch's flush starts");
    assert.equal(flushes.started, 2);
    flushes.releaseAll();
    await second;
  });

  it("flushes a real WAL file, and a missing one is nothing to flush", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "kiln-wal-sync-"));
    try {
      await flushWalFile(join(dataDir, "absent.sqlite3"))();
      const storage = await openStorage({ dataDir });
      try {
        await sql`create table probe (id integer primary key)`.execute(storage.db);
        await flushWalFile(join(dataDir, SQLITE_FILE_NAME))();
      } finally {
        await storage.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("SQLite commits wait for the WAL's flush off the event loop (sqlite only: PostgreSQL syncs in its own process)", () => {
  async function withStorage(fn: (storage: Storage, flushes: ReturnType<typeof heldFlushes>) => Promise<void>) {
    const dataDir = mkdtempSync(join(tmpdir(), "kiln-wal-sync-"));
    const flushes = heldFlushes();
    // Migrations commit too: their flushes complete at once until the storage is open.
    flushes.holding = false;
    const storage = await openStorage({ dataDir, sqliteFlushWal: () => flushes.flush() });
    flushes.holding = true;
    try {
      await fn(storage, flushes);
    } finally {
      flushes.releaseAll();
      await storage.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }

  it("a transaction resolves only after a flush; the connection is free meanwhile", async () => {
    await withStorage(async (storage, flushes) => {
      const before = flushes.started;
      const committing = storage.transaction(async (trx) => {
        await sql`create table probe (id integer primary key, body text not null)`.execute(trx);
        await sql`insert into probe (body) values ('acknowledged')`.execute(trx);
      });
      const state = settledFlag(committing);
      await turnsUntil(() => flushes.held === 1, "the commit's flush starts");
      assert.equal(flushes.started, before + 1);
      await someTurns();
      assert.equal(state.settled, false, "not acknowledged before the WAL is flushed");
      // Committed and visible, read on the same connection while the flush is held.
      const rows = await sql<{ body: string }>`select body from probe`.execute(storage.db);
      assert.deepEqual(
        rows.rows.map((r) => r.body),
        ["acknowledged"],
      );
      flushes.releaseAll();
      await committing;
    });
  });

  it("a write outside a transaction (RETURNING too) waits for a flush; a read and a relaxed commit do not", async () => {
    await withStorage(async (storage, flushes) => {
      await storage.transaction(
        async (trx) => {
          await sql`create table probe (id integer primary key, body text not null)`.execute(trx);
        },
        { durability: "relaxed" },
      );
      const afterRelaxed = flushes.started;
      await sql`select count(*) as n from probe`.execute(storage.db);
      assert.equal(flushes.started, afterRelaxed, "a read starts no flush");

      const relaxed = storage.transaction(
        async (trx) => {
          await sql`insert into probe (body) values ('relaxed')`.execute(trx);
        },
        { durability: "relaxed" },
      );
      await relaxed;
      assert.equal(flushes.started, afterRelaxed, "a relaxed commit starts no flush");

      const inserting = sql<{ id: number }>`insert into probe (body) values ('returning') returning id`.execute(
        storage.db,
      );
      const state = settledFlag(inserting);
      await turnsUntil(() => flushes.held === 1, "the insert's flush starts");
      await someTurns();
      assert.equal(state.settled, false, "an INSERT … RETURNING outside a transaction waits for its flush");
      flushes.releaseAll();
      assert.equal((await inserting).rows.length, 1);

      const updating = storage.db
        .updateTable("probe" as never)
        .set({ body: "changed" } as never)
        .execute();
      await turnsUntil(() => flushes.held === 1, "the update's flush starts");
      flushes.releaseAll();
      await updating;
    });
  });

  it("a failed flush fails the commit's caller with the disk's error", async () => {
    await withStorage(async (storage, flushes) => {
      const committing = storage.transaction(async (trx) => {
        await sql`create table probe (id integer primary key)`.execute(trx);
      });
      await turnsUntil(() => flushes.held === 1, "the commit's flush starts");
      flushes.failAll(new Error("EIO: i/o error, fdatasync"));
      await assert.rejects(committing, /EIO/);
    });
  });
});
