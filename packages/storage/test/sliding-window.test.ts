import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sql } from "kysely";
import { admitRequestInSlidingWindow, type Storage } from "../src/index.js";
import { DIALECTS } from "./dialects.js";
import { blockedOrSettled, deferred, withTwoStorages } from "./staged-transactions.js";

/**
 * The agent credentials' sliding-window admission (rate-limits/admit-request-in-sliding-window.ts;
 * on PostgreSQL one call of migration 0041's function). Several server processes share one limit
 * only if two admissions of one bucket are counted one after the other, so the concurrent cases
 * run from two Storages (two pools, as two processes have) at once.
 */

const T0 = Date.parse("2026-11-28T04:00:00.000Z");
const WINDOW = 60;

const admit = (storage: Storage, bucket: string, at: number, limit: number) =>
  admitRequestInSlidingWindow(storage, { bucket, now: new Date(at), windowSeconds: WINDOW, limit });

for (const dialect of DIALECTS) {
  describe(`sliding-window admission [${dialect.name}]`, { skip: dialect.skip }, () => {
    it("60 concurrent requests from two processes under a limit of 25: 25 admitted, counted 1 to 25", async () => {
      await withTwoStorages(dialect, async (main, other) => {
        const answers = await Promise.all(
          Array.from({ length: 60 }, (_, i) => admit(i % 2 === 0 ? main : other, "agent:flood", T0 + 250, 25)),
        );
        const admitted = answers.filter((a) => a.admitted);
        assert.equal(admitted.length, 25);
        // Each admission saw every one before it: no two read the same count.
        assert.deepEqual(
          admitted.map((a) => a.count).sort((a, b) => a - b),
          Array.from({ length: 25 }, (_, i) => i + 1),
        );
        for (const refused of answers.filter((a) => !a.admitted)) assert.equal(refused.count, 25);
        const stored = await main.db
          .selectFrom("rate_windows")
          .selectAll()
          .where("bucket", "=", "agent:flood")
          .execute();
        assert.deepEqual(
          stored.map((r) => Number(r.count)),
          [25],
        );
      });
    });

    it("an admission waits for one of the same bucket between its locking read and its count, then counts it", async () => {
      await withTwoStorages(dialect, async (main, other) => {
        assert.equal((await admit(main, "agent:wait", T0, 2)).admitted, true);
        // Another process's admission has read (and on PostgreSQL locked) the bucket's seconds
        // and not yet counted itself. A reader that did not wait here would admit a third.
        const read = deferred();
        const count = deferred();
        const inProgress = other.transaction(async (trx) => {
          let seconds = trx.selectFrom("rate_windows").select("count").where("bucket", "=", "agent:wait");
          if (other.capabilities.rowLocks) seconds = seconds.forUpdate();
          await seconds.execute();
          read.resolve();
          await count.promise;
          await trx
            .updateTable("rate_windows")
            .set((eb) => ({ count: eb("count", "+", 1) }))
            .where("bucket", "=", "agent:wait")
            .execute();
        });
        await read.promise;
        const waiting = admit(main, "agent:wait", T0 + 10, 2);
        assert.equal(await blockedOrSettled(main, waiting), "pending");
        count.resolve();
        await inProgress;
        assert.deepEqual(await waiting, { admitted: false, count: 2, resetAt: new Date(T0 + 61_000) });
      });
    });

    it("holds over every window: refused until the oldest counted second has left it, then admitted", async () => {
      await withTwoStorages(dialect, async (main) => {
        assert.equal((await admit(main, "agent:slide", T0 + 100, 3)).admitted, true);
        assert.equal((await admit(main, "agent:slide", T0 + 30_000, 3)).admitted, true);
        assert.equal((await admit(main, "agent:slide", T0 + 30_500, 3)).admitted, true);
        const refused = await admit(main, "agent:slide", T0 + 59_000, 3);
        assert.deepEqual(refused, { admitted: false, count: 3, resetAt: new Date(T0 + 61_000) });
        // 60.9 s after the first: its second may still overlap the window, so it still counts.
        assert.equal((await admit(main, "agent:slide", T0 + 60_900, 3)).admitted, false);
        const admitted = await admit(main, "agent:slide", T0 + 61_000, 3);
        assert.deepEqual(admitted, { admitted: true, count: 3 });
        // The seconds that can no longer count are gone; a refusal counts nothing.
        const stored = await main.db
          .selectFrom("rate_windows")
          .select(["window_start", "count"])
          .where("bucket", "=", "agent:slide")
          .orderBy("window_start")
          .execute();
        assert.deepEqual(
          stored.map((r) => [r.window_start, Number(r.count)]),
          [
            ["2026-11-28T04:00:30.000Z", 2],
            ["2026-11-28T04:00:59.000Z", 0],
            ["2026-11-28T04:01:00.000Z", 0],
            ["2026-11-28T04:01:01.000Z", 1],
          ],
        );
      });
    });

    it("buckets are counted apart", async () => {
      await withTwoStorages(dialect, async (main, other) => {
        assert.equal((await admit(main, "agent:a", T0, 1)).admitted, true);
        assert.equal((await admit(other, "agent:b", T0, 1)).admitted, true);
        assert.equal((await admit(other, "agent:a", T0, 1)).admitted, false);
      });
    });

    if (dialect.name === "postgres") {
      it("the relaxed commit is the call's own: the pooled connection keeps synchronous_commit", async () => {
        const database = await dialect.createDatabase();
        const storage = await database.open({ maxConnections: 1 });
        try {
          // The test cluster runs with synchronous_commit off; the session asks for durable commits.
          await sql`set synchronous_commit = on`.execute(storage.db);
          await admit(storage, "agent:durability", T0, 5);
          const afterwards = await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(storage.db);
          assert.equal(afterwards.rows[0]?.synchronous_commit, "on");
        } finally {
          await storage.close();
          await database.dispose();
        }
      });
    }
  });
}
