/**
 * Migrated PostgreSQL test databases, reused within a process: a test's database, once the test
 * is done with it, is emptied (its rows deleted, every sequence restarted), renamed,
 * and handed to the next test that asks for one, instead of dropped while the next is copied from
 * the template. A new session costs the cluster a process of its own and its start, and a copy
 * or a drop the template's ~1,200 files and a checkpoint: most of the CPU the in-process tests'
 * cluster spent (docs/benchmarks.md). Emptying runs on a session the test's storage already has
 * open where it can, and the rest on one session this process keeps to the cluster.
 *
 * The next test finds what a copy of the template has: the schema, the migrations' records, no
 * rows, sequences at their start. A database is reused only when its schema is still the
 * template's (relations, columns, constraints, triggers and the migrations' records, by digest):
 * one a test changed is dropped instead. The rename ends what `DROP DATABASE … WITH (FORCE)`
 * ended: sessions left on it are ended first, and a pool a test left open cannot reconnect to
 * the next test's rows under the old name. Idle databases stay on the cluster when the process
 * ends, as the throwaway clusters the tests run on (scripts/postgres-cluster.mjs) are deleted
 * with everything in them.
 */
import { randomBytes } from "node:crypto";
import { type Kysely, sql } from "kysely";
import pg from "pg";
import type { Database } from "../schema.js";

/** Runs one SQL text (several statements allowed) and resolves with its last result's rows. */
type RunSql = <Row>(text: string) => Promise<readonly Row[]>;

/** A database with no rows and the template's schema, ready for the next test: by cluster. */
const idle = new Map<string, string[]>();
/** The digest of the template's schema, by cluster: what a database must still have to be reused. */
const templateSchemas = new Map<string, Promise<string>>();
/** The session this process keeps to each cluster, to make, rename and drop test databases. */
const adminSessions = new Map<string, Promise<AdminSession>>();

/** A new name for a test database. */
export function testDatabaseName(): string {
  return `kiln_test_${randomBytes(6).toString("hex")}`;
}

/** A migrated database of the caller's own on the cluster: an emptied one if any is idle, else a copy of `template`. */
export async function takeMigratedDatabase(clusterUrl: string, template: string): Promise<string> {
  const reused = idle.get(clusterUrl)?.pop();
  if (reused !== undefined) return reused;
  const name = testDatabaseName();
  // FILE_COPY copies the template's files; PostgreSQL 15's default (WAL_LOG) writes every block
  // of it to the WAL, which for a few hundred databases a run was most of the cluster's CPU. The
  // checkpoint FILE_COPY asks for costs little on the throwaway cluster (fsync off).
  await administer(clusterUrl, `create database ${name} template ${template} strategy = file_copy`);
  if (!templateSchemas.has(clusterUrl)) {
    // Read off the first copy, untouched yet: the template itself takes no connections.
    const schema = withSession(databaseUrl(clusterUrl, name), schemaDigest);
    schema.catch(() => templateSchemas.delete(clusterUrl));
    templateSchemas.set(clusterUrl, schema);
  }
  await templateSchemas.get(clusterUrl);
  return name;
}

/**
 * Empties a database `takeMigratedDatabase` gave through a storage still open on it (no new
 * session): resolves true when it is ready to give back with `{ emptied: true }`, false when its
 * schema is no longer the template's or emptying failed (it is then to be dropped).
 */
export async function emptyThrough(clusterUrl: string, db: Kysely<Database>): Promise<boolean> {
  try {
    return await emptyIfTemplateSchema(clusterUrl, async (text) => (await sql.raw(text).execute(db)).rows as never);
  } catch {
    // What failed is told by the drop that follows (it ends the sessions and removes the
    // database whatever state it is in), not here: the test's own verdict is already given.
    return false;
  }
}

/**
 * Takes back a database `takeMigratedDatabase` gave, once no storage of the test is open on it:
 * emptied (unless `emptyThrough` did), renamed and kept for the next test when its schema is the
 * template's, else dropped. Sessions left on it are ended either way.
 */
export async function giveBackMigratedDatabase(
  clusterUrl: string,
  name: string,
  { emptied }: { emptied: boolean } = { emptied: false },
): Promise<void> {
  const reusable =
    emptied ||
    (await withSession(databaseUrl(clusterUrl, name), (client) =>
      emptyIfTemplateSchema(clusterUrl, async (text) => (await client.query(text)).rows),
    ).catch(() => false));
  const renamed = reusable ? await renameAway(clusterUrl, name) : undefined;
  if (renamed === undefined) {
    await administer(clusterUrl, `drop database if exists ${name} with (force)`);
    return;
  }
  const names = idle.get(clusterUrl) ?? [];
  names.push(renamed);
  idle.set(clusterUrl, names);
}

/**
 * Renames the database once no session is on it, ending any still there (a closed pool's
 * sessions end a moment after it closes; a pool a test left open is ended here): resolves with
 * the new name, or undefined when sessions kept coming back.
 */
async function renameAway(clusterUrl: string, name: string): Promise<string | undefined> {
  const renamed = testDatabaseName();
  for (let attempt = 0; attempt < 50; attempt++) {
    await administer(
      clusterUrl,
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}' and pid <> pg_backend_pid()`,
    );
    try {
      await administer(clusterUrl, `alter database ${name} rename to ${renamed}`);
      return renamed;
    } catch (error) {
      // 55006 object_in_use: a session is still on it (ending one is not immediate).
      if ((error as { code?: string }).code !== "55006") throw error;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  return undefined;
}

async function emptyIfTemplateSchema(clusterUrl: string, run: RunSql): Promise<boolean> {
  const schema = await templateSchemas.get(clusterUrl);
  if (schema === undefined || (await schemaDigest(run)) !== schema) return false;
  await empty(run);
  return true;
}

/**
 * Deletes the rows of every table in the public schema that has had a row (its file has a page:
 * found without opening the tables, which a new session pays for by the table) and restarts
 * every sequence, even those of empty tables: a rolled-back insert still moved its sequence on.
 * Neither triggers nor foreign keys act (session_replication_role = replica): the audit log
 * refuses a DELETE, as it should from kiln's own code, and every table goes at once.
 *
 * DELETE, not TRUNCATE: TRUNCATE gives each table new files, and one table cannot go without
 * every table whose foreign key points at it (CASCADE), most of the schema for a test's one row.
 * The deleted rows stay in the files as dead ones the next test's scans skip; the throwaway
 * cluster runs no vacuum (scripts/postgres-cluster.mjs), which would free their space out of
 * order, so a table's rows are read back in the order they were inserted, as in a new copy.
 */
async function empty(run: RunSql): Promise<void> {
  const tables = await run<{ name: string }>(`
    select relname as name from pg_class
    where relnamespace = 'public'::regnamespace and relkind = 'r' and relname not like 'kysely_migration%'
      and (pg_stat_file(pg_relation_filepath(oid), true)).size > 0`);
  const sequences = await run<{ name: string }>(
    "select sequencename as name from pg_sequences where schemaname = 'public'",
  );
  const statements = [
    ...tables.map(({ name }) => `delete from ${identifier(name)}`),
    ...sequences.map(({ name }) => `alter sequence ${identifier(name)} restart`),
  ];
  if (statements.length === 0) return;
  await run(["begin", "set local session_replication_role = replica", ...statements, "commit"].join(";\n"));
}

/**
 * A digest of what the migrations made, which emptying keeps and a test may have changed: the
 * public schema's relations (how many, their kinds and columns' count, the newest's oid: a new
 * or replaced one has a newer), its constraints and triggers, and the migrations kysely records
 * as run and when (a test that ran one again, under a fake clock too, changed the order kysely checks). Read from three small catalogs, as a new session pays for every catalog it reads.
 */
async function schemaDigest(run: RunSql | pg.Client): Promise<string> {
  const query: RunSql = run instanceof pg.Client ? async (text) => (await run.query(text)).rows : run;
  const rows = await query<{ digest: string }>(`
    select md5(concat_ws('|',
      (select count(*) || ':' || sum(relnatts) || ':' || max(oid::bigint) || ':' || string_agg(relkind::text, '' order by oid)
         from pg_class where relnamespace = 'public'::regnamespace),
      (select count(*) || ':' || max(oid::bigint) from pg_constraint where connamespace = 'public'::regnamespace),
      (select count(*) || ':' || string_agg(tgenabled::text, '' order by oid) from pg_trigger where not tgisinternal),
      (select string_agg(name || '@' || timestamp, ',' order by name) from kysely_migration)
    )) as digest`);
  return rows[0]?.digest ?? "";
}

/** Runs `statement` on this process's session to the cluster (opened on first use). */
export async function administer(clusterUrl: string, statement: string): Promise<void> {
  let session = adminSessions.get(clusterUrl);
  if (session === undefined) {
    session = AdminSession.open(clusterUrl);
    session.catch(() => adminSessions.delete(clusterUrl));
    adminSessions.set(clusterUrl, session);
  }
  await (await session).run(statement);
}

/**
 * One session to the cluster's `postgres` database, holding the process open only while a
 * statement runs on it: a test file's process ends when its tests do, with this session still open.
 * A session the server ended is opened again on the next statement.
 */
class AdminSession {
  private constructor(
    private readonly clusterUrl: string,
    private client: pg.Client,
    private broken = false,
  ) {}

  static async open(clusterUrl: string): Promise<AdminSession> {
    return new AdminSession(clusterUrl, await AdminSession.connect(clusterUrl));
  }

  private static async connect(clusterUrl: string): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: clusterUrl });
    await client.connect();
    // An idle session the server ends (the cluster stopping) must not end the process with an
    // unhandled 'error': the next statement finds the session broken and opens another.
    client.on("error", () => {});
    AdminSession.socketOf(client)?.unref();
    return client;
  }

  private static socketOf(client: pg.Client): { ref(): void; unref(): void } | undefined {
    return (client as unknown as { connection?: { stream?: { ref(): void; unref(): void } } }).connection?.stream;
  }

  private queue: Promise<unknown> = Promise.resolve();

  /** Runs statements one after another: a pg.Client runs one at a time anyway. */
  run(statement: string): Promise<void> {
    const next = this.queue.then(() => this.runNow(statement));
    this.queue = next.catch(() => {});
    return next;
  }

  private async runNow(statement: string): Promise<void> {
    if (this.broken) {
      this.client = await AdminSession.connect(this.clusterUrl);
      this.broken = false;
    }
    const socket = AdminSession.socketOf(this.client);
    socket?.ref();
    try {
      await this.client.query(statement);
    } catch (error) {
      // A statement's own error leaves the session usable; a lost connection does not.
      if ((error as { code?: string }).code === undefined) this.broken = true;
      throw error;
    } finally {
      socket?.unref();
    }
  }
}

function databaseUrl(clusterUrl: string, name: string): string {
  const url = new URL(clusterUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function withSession<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

function identifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
