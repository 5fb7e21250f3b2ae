/**
 * The migrated templates test databases are copied from (test-databases.ts): one PostgreSQL
 * database per cluster, copied by `CREATE DATABASE … TEMPLATE`, and one SQLite file per temp
 * dir, copied as a file. Running every migration costs more than copying their result, and a
 * run makes hundreds of test databases.
 *
 * Each template is named by a digest of the built migrations (this package's `migrations/`), so
 * a template is always the current migrations' result: a changed migration makes a new name,
 * built on first use. `npm test` gives every run a new cluster and temp dir, so there each run
 * builds its own.
 *
 * Test files run in several processes at once. On PostgreSQL the first to need the template
 * builds it under a cluster-wide advisory lock, the others wait for it; a template is marked
 * finished (`is_template`) only once migrated, so one left half-built by a process that died is
 * dropped and built again. On SQLite each process that finds no template builds one in a
 * directory of its own and renames it into place: a rename is atomic, so a reader sees no file
 * or a whole one, and two processes racing to build both rename a whole one.
 */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { openStorage } from "../open-storage.js";
import { SQLITE_FILE_NAME } from "../sqlite/open-sqlite-storage.js";

/** The advisory lock key the template's builders share on a cluster (any constant no other code takes). */
const TEMPLATE_LOCK = 7_305_146_259_001;

let digest: Promise<string> | undefined;
const postgresTemplates = new Map<string, Promise<string>>();
let sqliteTemplateFile: Promise<string> | undefined;

/** The name of the migrated template database on the cluster at `clusterUrl`, built if missing. */
export function postgresTemplate(clusterUrl: string): Promise<string> {
  let template = postgresTemplates.get(clusterUrl);
  if (template === undefined) {
    template = buildPostgresTemplate(clusterUrl);
    // A failed build is tried again by the next test rather than failing every later one.
    template.catch(() => postgresTemplates.delete(clusterUrl));
    postgresTemplates.set(clusterUrl, template);
  }
  return template;
}

/** The path of the migrated template SQLite file in this process's temp dir, built if missing. */
export function sqliteTemplate(): Promise<string> {
  if (sqliteTemplateFile === undefined) {
    sqliteTemplateFile = buildSqliteTemplate();
    sqliteTemplateFile.catch(() => {
      sqliteTemplateFile = undefined;
    });
  }
  return sqliteTemplateFile;
}

async function buildPostgresTemplate(clusterUrl: string): Promise<string> {
  const name = `kiln_template_${await migrationsDigest()}`;
  const client = new pg.Client({ connectionString: clusterUrl });
  await client.connect();
  try {
    await client.query("select pg_advisory_lock($1)", [TEMPLATE_LOCK]);
    const found = await client.query<{ finished: boolean }>(
      "select datistemplate as finished from pg_database where datname = $1",
      [name],
    );
    if (found.rows[0]?.finished === true) return name;
    if (found.rows.length > 0) await client.query(`drop database ${name} with (force)`);
    await client.query(`create database ${name}`);
    const url = new URL(clusterUrl);
    url.pathname = `/${name}`;
    const storage = await openStorage({ databaseUrl: url.toString(), dataDir: "/nonexistent" });
    await storage.close();
    // No connections from here on: a database being copied must have none. A closed pool's
    // backends may still be exiting, and CREATE DATABASE waits only so long for them, so the
    // template is marked finished (and waiters let go) once the server shows none left.
    await client.query(`alter database ${name} with allow_connections false`);
    await untilNoBackendsOn(client, name);
    await client.query(`alter database ${name} with is_template true`);
    return name;
  } finally {
    // Ending the session releases the lock.
    await client.end();
  }
}

async function untilNoBackendsOn(client: pg.Client, database: string): Promise<void> {
  for (;;) {
    const left = await client.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where datname = $1",
      [database],
    );
    if (left.rows[0]?.n === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function buildSqliteTemplate(): Promise<string> {
  const file = join(tmpdir(), `kiln-sqlite-template-${await migrationsDigest()}.sqlite3`);
  if (existsSync(file)) return file;
  const dataDir = await mkdtemp(join(tmpdir(), "kiln-sqlite-template-"));
  try {
    const storage = await openStorage({ dataDir });
    // Closing the last connection checkpoints the WAL into the file and removes it.
    await storage.close();
    if (existsSync(join(dataDir, `${SQLITE_FILE_NAME}-wal`))) {
      throw new Error("the migrated SQLite template kept a WAL file after closing; its file alone is not the database");
    }
    await rename(join(dataDir, SQLITE_FILE_NAME), file);
    return file;
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** A digest of the built migrations, which the templates' names carry. */
function migrationsDigest(): Promise<string> {
  digest ??= (async () => {
    const dir = fileURLToPath(new URL("../migrations/", import.meta.url));
    const hash = createHash("sha256");
    for (const file of (await readdir(dir)).filter((f) => f.endsWith(".js")).sort()) {
      hash.update(file).update(await readFile(join(dir, file)));
    }
    return hash.digest("hex").slice(0, 16);
  })();
  return digest;
}
