import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { sql } from "kysely";
import pg from "pg";
import { appendAuditEntry, type Storage } from "../src/index.js";
import { DIALECTS } from "./dialects.js";

// What every PostgreSQL test relies on when it asks for a database (src/testing/
// reused-postgres-databases.ts): the one it gets, reused from an earlier test or not, has the
// template's schema and nothing else, and nothing of the earlier test can reach it.
const postgres = DIALECTS.find((dialect) => dialect.name === "postgres");
const now = new Date("2026-11-30T08:00:00.000Z");

async function identity(storage: Storage): Promise<{ oid: number; name: string }> {
  const { rows } = await sql<{ oid: number; name: string }>`
    select oid::int as oid, datname as name from pg_database where datname = current_database()`.execute(storage.db);
  const [row] = rows;
  assert.ok(row !== undefined);
  return row;
}

async function auditRows(storage: Storage): Promise<number> {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from audit_entries`.execute(storage.db);
  return rows[0]?.n ?? -1;
}

/** Whether a new session to the database `name` on the test cluster is refused for its not existing. */
async function refusedAsMissing(name: string): Promise<boolean> {
  const url = new URL(process.env.KILN_TEST_POSTGRES_URL ?? "");
  url.pathname = `/${name}`;
  const client = new pg.Client({ connectionString: url.toString() });
  try {
    await client.connect();
    await client.end();
    return false;
  } catch (error) {
    return (error as { code?: string }).code === "3D000";
  }
}

describe("reused PostgreSQL test databases", { skip: postgres?.skip ?? "no PostgreSQL dialect" }, () => {
  it("hands the next test the database emptied under a new name: no rows, sequences at their start, the old name gone", async () => {
    assert.ok(postgres);
    const first = await postgres.openFresh();
    const was = await identity(first);
    const entry = await appendAuditEntry(first, { tenantId: "acme", actor: "a", target: "t", value: "1" }, now);
    // A rolled-back insert moves the sequence on too.
    await assert.rejects(
      first.transaction(async (trx) => {
        await appendAuditEntry(trx, { tenantId: "acme", actor: "a", target: "t", value: "2" }, now);
        throw new Error("rolled back");
      }),
      /rolled back/,
    );
    await first.close();

    const next = await postgres.openFresh();
    try {
      const is = await identity(next);
      assert.equal(is.oid, was.oid, "the same database, reused");
      assert.notEqual(is.name, was.name);
      assert.equal(await auditRows(next), 0);
      const again = await appendAuditEntry(next, { tenantId: "acme", actor: "a", target: "t", value: "1" }, now);
      assert.equal(again.sequence, entry.sequence);
      // Emptying turned the audit log's guard off for itself alone: it refuses deletes again.
      await assert.rejects(sql`delete from audit_entries`.execute(next.db), /append-only/);
      assert.equal(await refusedAsMissing(was.name), true);
    } finally {
      await next.close();
    }
  });

  it("drops a database whose schema a test changed instead of handing it on", async () => {
    assert.ok(postgres);
    const first = await postgres.openFresh();
    const was = await identity(first);
    await sql`create table left_behind (id integer primary key)`.execute(first.db);
    await first.close();

    const next = await postgres.openFresh();
    try {
      assert.notEqual((await identity(next)).oid, was.oid);
      const { rows } = await sql<{ n: number }>`
        select count(*)::int as n from pg_tables where tablename = 'left_behind'`.execute(next.db);
      assert.equal(rows[0]?.n, 0);
      assert.equal(await refusedAsMissing(was.name), true);
    } finally {
      await next.close();
    }
  });

  it("ends a session a test left open on its database, which cannot reach the next test's under the old name", async () => {
    assert.ok(postgres);
    const database = await postgres.createDatabase();
    const storage = await database.open();
    const was = await identity(storage);
    const left = new pg.Client({ connectionString: (database.options as { databaseUrl: string }).databaseUrl });
    left.on("error", () => {});
    await left.connect();
    await database.disposeWith(storage);

    await assert.rejects(left.query("select 1"));
    assert.equal(await refusedAsMissing(was.name), true);
  });
});
