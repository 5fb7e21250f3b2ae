import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemClock } from "@kiln/contract";
import { sql } from "kysely";
import { createTenant, migrateToLatest } from "../src/index.js";
import { migrationsFor } from "../src/migrations/migrations.js";
import { DIALECTS } from "./dialects.js";

for (const dialect of DIALECTS) {
  describe(`migrations [${dialect.name}]`, { skip: dialect.skip }, () => {
    it("applies each migration once; reopening changes nothing and keeps the data", async () => {
      const database = await dialect.createDatabase({ migrated: false });
      try {
        const first = await database.open();
        await createTenant(first, { id: "acme", displayName: "Acme" }, systemClock.now());
        await first.close();

        const second = await database.open();
        try {
          assert.deepEqual(await migrateToLatest(second), { applied: [] });
          const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(
            second.db,
          );
          assert.deepEqual(
            applied.rows.map((row) => row.name),
            Object.keys(migrationsFor(dialect.name)).sort(),
          );
          const tenant = await second.db.selectFrom("tenants").selectAll().executeTakeFirstOrThrow();
          assert.equal(tenant.display_name, "Acme");
        } finally {
          await second.close();
        }
      } finally {
        await database.dispose();
      }
    });

    it("several Storages opening one fresh database at once migrate it exactly once", async () => {
      const database = await dialect.createDatabase({ migrated: false });
      try {
        const storages = await Promise.all(Array.from({ length: 4 }, () => database.open()));
        try {
          const [any] = storages;
          assert.ok(any);
          const applied = await sql<{ name: string }>`select name from kysely_migration`.execute(any.db);
          assert.equal(applied.rows.length, Object.keys(migrationsFor(dialect.name)).length);
        } finally {
          await Promise.all(storages.map((storage) => storage.close()));
        }
      } finally {
        await database.dispose();
      }
    });

    it("configures the engine as the design requires", async () => {
      const storage = await dialect.openFresh();
      try {
        if (storage.dialect === "sqlite") {
          const pragma = async (name: string) =>
            (await sql<Record<string, unknown>>`select * from ${sql.raw(`pragma_${name}`)}`.execute(storage.db))
              .rows[0];
          assert.deepEqual(await pragma("journal_mode"), { journal_mode: "wal" });
          // NORMAL: commits are fsynced by the WAL's flush off the event loop, not by SQLite (wal-sync.test.ts).
          assert.deepEqual(await pragma("synchronous"), { synchronous: 1 });
          assert.deepEqual(await pragma("foreign_keys"), { foreign_keys: 1 });
          assert.equal(storage.capabilities.singleWriter, true);
        } else {
          const row = await sql<{
            big: unknown;
            now: unknown;
          }>`select 9007199254740991::bigint as big, now() as now`.execute(storage.db);
          assert.equal(row.rows[0]?.big, Number.MAX_SAFE_INTEGER);
          assert.equal(typeof row.rows[0]?.now, "string");
          await assert.rejects(
            sql`select 9007199254740993::bigint as too_big`.execute(storage.db),
            /does not fit a JavaScript number/,
          );
          assert.equal(storage.capabilities.skipLocked, true);
          // Manifests compress with lz4, not pglz (migrations 0039 and 0042; this cluster is built with lz4).
          const compression = await sql<{ relation: string; attname: string; attcompression: string }>`
            select attrelid::regclass::text as relation, attname, attcompression from pg_attribute
            where (attrelid, attname) in (('source_uploads'::regclass, 'manifest'), ('job_manifests'::regclass, 'manifest'))
            order by relation
          `.execute(storage.db);
          assert.deepEqual(
            compression.rows.map((r) => [r.relation, r.attname, r.attcompression]),
            [
              ["job_manifests", "manifest", "l"],
              ["source_uploads", "manifest", "l"],
            ],
          );
        }
      } finally {
        await storage.close();
      }
    });

    it("a relaxed transaction lowers durability for its own commit only, and still rolls back", async () => {
      const storage = await dialect.openFresh();
      const level = async (db: typeof storage.db) =>
        storage.dialect === "sqlite"
          ? (await sql<{ synchronous: number }>`select * from pragma_synchronous`.execute(db)).rows[0]?.synchronous
          : (
              await sql<{ level: string }>`
                select setting || ' from ' || source as level from pg_settings where name = 'synchronous_commit'
              `.execute(db)
            ).rows[0]?.level;
      // The test cluster itself runs without synchronous commits (scripts/postgres-cluster.mjs),
      // so on PostgreSQL the level's source tells the transaction's own setting from the
      // cluster's, and "afterwards" is compared with the level before. On SQLite the level is
      // NORMAL throughout: a relaxed commit is one that waits for no WAL flush (wal-sync.test.ts).
      const relaxed = storage.dialect === "sqlite" ? 1 : "off from session";
      const tenant = (id: string) => ({ id, display_name: id, created_at: "2026-11-22T07:10:13.000Z" });
      try {
        const full = await level(storage.db);
        if (storage.dialect === "sqlite") assert.equal(full, 1);
        const inside = await storage.transaction(
          async (trx) => {
            await trx.insertInto("tenants").values(tenant("relaxed")).execute();
            return level(trx);
          },
          { durability: "relaxed" },
        );
        assert.equal(inside, relaxed);
        assert.equal(await level(storage.db), full, "back to full afterwards");
        await assert.rejects(
          storage.transaction(
            async (trx) => {
              await trx.insertInto("tenants").values(tenant("rolled-back")).execute();
              throw new Error("boom");
            },
            { durability: "relaxed" },
          ),
          /boom/,
        );
        assert.equal(await level(storage.db), full);
        const ids = (await storage.db.selectFrom("tenants").select("id").execute()).map((r) => r.id);
        assert.ok(ids.includes("relaxed"));
        assert.ok(!ids.includes("rolled-back"));
      } finally {
        await storage.close();
      }
    });

    it("refuses timestamps that are not fixed-width ISO-8601 UTC with milliseconds", async () => {
      const storage = await dialect.openFresh();
      try {
        await assert.rejects(
          storage.db
            .insertInto("tenants")
            .values({ id: "x", display_name: "X", created_at: "2026-11-22T07:10:13Z" })
            .execute(),
        );
      } finally {
        await storage.close();
      }
    });
  });
}
