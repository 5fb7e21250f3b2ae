/**
 * T9 audit immutability, on SQLite and PostgreSQL. With tenant and operator audit entries
 * written by real operations:
 *  - through the API: the operator's refuse_patch / refuse_delete on every entry and on a
 *    sequence that does not exist are refused, and each attempt is itself audited; a tenant
 *    caller's PATCH, PUT, DELETE and POST on /api/audit(/…) reach no operation;
 *  - directly in the database, over a connection of its own (better-sqlite3 on the file, pg on
 *    the URL), as an operator with a SQL shell would: UPDATE and DELETE of one row and of all,
 *    TRUNCATE, INSERT OR REPLACE / REPLACE / upsert onto an existing sequence, MERGE.
 * Broken promises: any statement that succeeds, any entry that differs afterwards, any API
 * attempt that is not refused or (on the operator surface) not audited. Schema changes (DROP
 * TRIGGER, ALTER TABLE) are outside the promise: whoever may change the schema may remove it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DialectUnderTest, TestDatabase } from "@kiln/storage/testing";
import BetterSqlite3 from "better-sqlite3";
import pg from "pg";
import { bearer, type TestApp, testApp } from "../src/testing/harness.js";
import { masterKey, operatorCredential } from "../src/web/auth/operator-credential.js";
import { populateTenants } from "./fixtures.js";
import { count, runTrial, trialDialects } from "./trial.js";

const TABLES = ["audit_entries", "operator_audit_entries"] as const;

/** Statements that would rewrite `table`'s history; `{first}` is its oldest sequence. */
function attacks(dialect: string, table: string, first: number): string[] {
  const columns =
    table === "audit_entries"
      ? "tenant_id, actor, target, value, changed_at, effective"
      : "actor, target, value, changed_at, effective";
  const forged = columns.replace("actor", "'forged'");
  const common = [
    `update ${table} set value = '{"forged":true}' where sequence = ${first}`,
    `update ${table} set actor = 'forged'`,
    `delete from ${table} where sequence = ${first}`,
    `delete from ${table}`,
  ];
  if (dialect === "sqlite") {
    return [
      ...common,
      `insert or replace into ${table} (sequence, ${columns}) select sequence, ${forged} from ${table} where sequence = ${first}`,
      `replace into ${table} (sequence, ${columns}) select sequence, ${forged} from ${table} where sequence = ${first}`,
      `insert into ${table} (sequence, ${columns}) select sequence, ${forged} from ${table} where sequence = ${first} ` +
        `on conflict (sequence) do update set actor = 'forged'`,
      `update or replace ${table} set sequence = ${first} where sequence = (select max(sequence) from ${table})`,
    ];
  }
  return [
    ...common,
    `truncate ${table}`,
    `truncate ${table} cascade`,
    `insert into ${table} (sequence, ${columns}) overriding system value select sequence, ${forged} from ${table} ` +
      `where sequence = ${first} on conflict (sequence) do update set actor = 'forged'`,
    `merge into ${table} t using (select ${first} as s) x on t.sequence = x.s when matched then delete`,
    `merge into ${table} t using (select ${first} as s) x on t.sequence = x.s when matched then update set actor = 'forged'`,
  ];
}

/** A raw connection to the test database, beside the app's own. */
async function rawConnection(database: TestDatabase, dialect: string) {
  if (dialect === "sqlite") {
    const file = join(String(database.options.dataDir), "kiln.sqlite3");
    const db = new BetterSqlite3(file);
    return {
      run: async (statement: string) => void db.prepare(statement).run(),
      dump: async (table: string) => JSON.stringify(db.prepare(`select * from ${table} order by sequence`).all()),
      first: async (table: string) =>
        Number((db.prepare(`select min(sequence) as s from ${table}`).get() as { s: number }).s),
      close: async () => void db.close(),
    };
  }
  const client = new pg.Client({ connectionString: String(database.options.databaseUrl) });
  await client.connect();
  return {
    run: async (statement: string) => void (await client.query(statement)),
    dump: async (table: string) =>
      JSON.stringify((await client.query(`select * from ${table} order by sequence`)).rows),
    first: async (table: string) => Number((await client.query(`select min(sequence) as s from ${table}`)).rows[0].s),
    close: () => client.end(),
  };
}

interface Tally {
  apiAttempts: number;
  statements: number;
  entries: number;
  broken: string[];
}

async function trialOn(dialect: DialectUnderTest, tally: Tally): Promise<void> {
  const database = await dialect.createDatabase();
  const storage = await database.open();
  const t: TestApp = await testApp(storage);
  const keyDir = await mkdtemp(join(tmpdir(), "kiln-t9-key-"));
  const raw = await rawConnection(database, dialect.name);
  try {
    const [world] = await populateTenants(t, 1);
    if (world === undefined) throw new Error("no tenant populated");
    const credential = await operatorCredential(t.storage, masterKey(keyDir), false, t.clock.now());
    const opened = await t.app.inject({ method: "POST", url: "/operator/auth/session", headers: bearer(credential) });
    const cookie = opened.cookies.find((c) => c.name === "kiln_operator_session")?.value;
    if (cookie === undefined) throw new Error(`operator session: ${opened.body}`);
    const operator = { cookie: `kiln_operator_session=${cookie}`, origin: "http://kiln.test" };

    // Through the API: the operator surface's refusals, each audited.
    const listed = await t.app.inject({ method: "GET", url: "/operator/api/audit/export", headers: operator });
    const sequences = (listed.json() as { sequence: number }[]).map((e) => e.sequence);
    const operatorEntries = async () => Number(JSON.parse(await raw.dump("operator_audit_entries")).length);
    const tenantBefore = await raw.dump("audit_entries");
    for (const sequence of [...sequences, 999_999]) {
      for (const method of ["PATCH", "DELETE"] as const) {
        const before = await operatorEntries();
        const res = await t.app.inject({ method, url: `/operator/api/audit/${sequence}`, headers: operator });
        tally.apiAttempts += 1;
        const body = res.json() as { refused?: boolean; code?: string };
        const refused = body.refused === true || body.code === "conflict";
        if (!refused)
          tally.broken.push(`${dialect.name}: ${method} operator audit ${sequence}: ${res.statusCode} ${res.body}`);
        if ((await operatorEntries()) !== before + 1) {
          tally.broken.push(`${dialect.name}: ${method} operator audit ${sequence} was not audited`);
        }
      }
    }
    const tenantEntries = JSON.parse(tenantBefore) as { sequence: number }[];
    for (const url of ["/api/audit", ...tenantEntries.map((e) => `/api/audit/${e.sequence}`)]) {
      for (const method of ["PATCH", "PUT", "DELETE", "POST"] as const) {
        const res = await t.app.inject({
          method,
          url,
          headers: { ...bearer(world.owner.token), "content-type": "application/json", "idempotency-key": "t9" },
          payload: "{}",
        });
        tally.apiAttempts += 1;
        if (res.statusCode < 400) tally.broken.push(`${dialect.name}: ${method} ${url} answered ${res.statusCode}`);
      }
    }
    if ((await raw.dump("audit_entries")) !== tenantBefore) {
      tally.broken.push(`${dialect.name}: the tenant audit changed under API attempts`);
    }

    // Directly in the database.
    for (const table of TABLES) {
      const before = await raw.dump(table);
      const entries = (JSON.parse(before) as unknown[]).length;
      tally.entries += entries;
      if (entries < 2) throw new Error(`${table} holds ${entries} entries; the trial needs some`);
      const first = await raw.first(table);
      for (const statement of attacks(dialect.name, table, first)) {
        tally.statements += 1;
        let error: unknown = null;
        try {
          await raw.run(statement);
        } catch (e) {
          error = e;
        }
        if (error === null) tally.broken.push(`${dialect.name}: succeeded: ${statement}`);
        else if (!String((error as Error).message).includes("append-only")) {
          // Refused, but not by the audit rule (e.g. a constraint): still no change, but say so.
          process.stderr.write(`T9 note: ${dialect.name}: ${statement}: ${(error as Error).message}\n`);
        }
      }
      if ((await raw.dump(table)) !== before) tally.broken.push(`${dialect.name}: ${table} differs after the attempts`);
    }
  } finally {
    await raw.close();
    await t.close();
    await database.dispose();
    await rm(keyDir, { recursive: true, force: true });
  }
}

await runTrial("T9", "audit immutability", async () => {
  const tally: Tally = { apiAttempts: 0, statements: 0, entries: 0, broken: [] };
  const engines: string[] = [];
  for (const dialect of trialDialects()) {
    await trialOn(dialect, tally);
    engines.push(dialect.name);
  }
  return {
    figure:
      `${count(tally.apiAttempts)} API edit/delete attempts and ${count(tally.statements)} direct SQL statements against ` +
      `${count(tally.entries)} audit entries (${engines.join(" and ")}): ${tally.broken.length} succeeded, changed an entry ` +
      "or went unaudited",
    broken: tally.broken,
  };
});
