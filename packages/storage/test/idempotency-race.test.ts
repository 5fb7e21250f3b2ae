import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sql } from "kysely";
import {
  completeIdempotencyKey,
  createTenant,
  type ReserveIdempotencyKeyInput,
  reserveIdempotencyKey,
  type Storage,
} from "../src/index.js";
import { runContender } from "./child-processes.js";
import { DIALECTS, type TestDatabase } from "./dialects.js";

const CALLERS = 50;
const T0 = new Date("2026-11-22T07:10:13.123Z");

for (const dialect of DIALECTS) {
  describe(`idempotency races [${dialect.name}]`, { skip: dialect.skip }, () => {
    /**
     * Several Storages over one database: on SQLite, separate connections to one file (as
     * separate processes would have); on PostgreSQL, separate pools of several connections.
     */
    async function withStorages(test: (storages: Storage[], database: TestDatabase) => Promise<void>) {
      const database = await dialect.createDatabase();
      const storages: Storage[] = [];
      try {
        for (let i = 0; i < 3; i++) {
          storages.push(await database.open({ maxConnections: 8 }));
        }
        await test(storages, database);
      } finally {
        await Promise.all(storages.map((storage) => storage.close()));
        await database.dispose();
      }
    }

    /** Fires CALLERS reservations at once, spread over the storages; returns the kinds seen. */
    async function race(storages: Storage[], input: ReserveIdempotencyKeyInput) {
      const results = await Promise.all(
        Array.from({ length: CALLERS }, (_, i) => {
          const storage = storages[i % storages.length];
          assert.ok(storage);
          return reserveIdempotencyKey(storage, input);
        }),
      );
      return results;
    }

    function countKinds(kinds: readonly string[]): Record<string, number> {
      const counts: Record<string, number> = {};
      for (const kind of kinds) counts[kind] = (counts[kind] ?? 0) + 1;
      return counts;
    }

    const input: ReserveIdempotencyKeyInput = {
      tenantId: "acme",
      key: "race",
      operation: "credentials.create",
      requestHash: "same",
      now: T0,
    };

    it(`${CALLERS} concurrent callers with one new key: exactly one is reserved`, async () => {
      await withStorages(async (storages) => {
        const results = await race(storages, input);
        assert.deepEqual(countKinds(results.map((r) => r.kind)), { reserved: 1, in_flight: CALLERS - 1 });
      });
    });

    it(`${CALLERS} concurrent callers taking over one lapsed reservation: exactly one wins`, async () => {
      await withStorages(async (storages) => {
        const [storage] = storages;
        assert.ok(storage);
        assert.equal((await reserveIdempotencyKey(storage, input)).kind, "reserved");
        const later = { ...input, now: new Date(T0.getTime() + 301_000) };
        const results = await race(storages, later);
        assert.deepEqual(countKinds(results.map((r) => r.kind)), { reserved: 1, in_flight: CALLERS - 1 });
      });
    });

    it(`${CALLERS} concurrent callers replacing one expired receipt: exactly one wins`, async () => {
      await withStorages(async (storages) => {
        const [storage] = storages;
        assert.ok(storage);
        const first = await reserveIdempotencyKey(storage, input);
        assert.ok(first.kind === "reserved");
        await completeIdempotencyKey(storage, { ...input, token: first.token, status: 200, body: "{}" });
        const nextDay = { ...input, requestHash: "different", now: new Date(T0.getTime() + 86_400_000) };
        const results = await race(storages, nextDay);
        assert.deepEqual(countKinds(results.map((r) => r.kind)), { reserved: 1, in_flight: CALLERS - 1 });
      });
    });

    it("callers in several processes with one key: exactly one is reserved", async () => {
      await withStorages(async (_storages, database) => {
        const processes = 4;
        const startAt = Date.now() + 1500; // all children are up and connected by then
        const perProcess = await Promise.all(
          Array.from({ length: processes }, () =>
            runContender<string[]>({
              mode: "reserve",
              options: database.options,
              startAt,
              callers: Math.ceil(CALLERS / processes),
              tenantId: "acme",
              key: "cross-process",
            }),
          ),
        );
        const counts = countKinds(perProcess.flat());
        assert.equal(counts.reserved, 1);
        assert.equal(counts.in_flight, processes * Math.ceil(CALLERS / processes) - 1);
      });
    });

    it("read-then-write transactions from several processes neither deadlock nor lose updates", async () => {
      await withStorages(async ([storage], database) => {
        assert.ok(storage);
        await createTenant(storage, { id: "counter" }, new Date());
        const processes = 4;
        const transactions = 25;
        const startAt = Date.now() + 1500;
        await Promise.all(
          Array.from({ length: processes }, () =>
            runContender<number>({
              mode: "read-then-write",
              options: database.options,
              startAt,
              transactions,
              tenantId: "counter",
            }),
          ),
        );
        const rows = await storage.db
          .selectFrom("repositories")
          .select("name")
          .where("tenant_id", "=", "counter")
          .orderBy("name")
          .execute();
        assert.equal(rows.length, processes * transactions);
        assert.equal(rows.at(-1)?.name, `counter/${String(processes * transactions - 1).padStart(6, "0")}`);
      });
    });

    it("transactions of two Storages in one process interleave without stalling the event loop", async () => {
      await withStorages(async ([a, b]) => {
        assert.ok(a && b);
        await createTenant(a, { id: "interleave" }, new Date());
        const slow = a.transaction(async (trx) => {
          await trx.insertInto("repositories").values(repository("slow/one")).execute();
          await new Promise((resolve) => setTimeout(resolve, 100)); // holds the transaction open
          await trx.insertInto("repositories").values(repository("slow/two")).execute();
        });
        const quick = b.transaction(async (trx) => {
          await trx.insertInto("repositories").values(repository("quick/one")).execute();
        });
        const autocommit = b.db.insertInto("repositories").values(repository("plain/one")).execute();
        // Every caller got through (a caller that waited out SQLite's lock budget would reject).
        // On SQLite, no caller's wait for the writer sleeps inside a synchronous call
        // (busy_timeout 0, retried off the event loop), which is what lets the held
        // transaction's timer fire and commit meanwhile.
        await Promise.all([slow, quick, autocommit]);
        if (a.dialect === "sqlite") {
          const busy = await sql<{ timeout: number }>`select * from pragma_busy_timeout`.execute(a.db);
          assert.deepEqual(busy.rows, [{ timeout: 0 }]);
        }
        const count = await a.db
          .selectFrom("repositories")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("tenant_id", "=", "interleave")
          .executeTakeFirstOrThrow();
        assert.equal(Number(count.n), 4);
      });
    });
  });
}

function repository(name: string) {
  return { tenant_id: "interleave", name, onboarded_at: T0.toISOString(), onboarded_by: "test" };
}
