/**
 * Throwaway databases for tests, on every engine — shared by this package's tests and by other
 * packages' (`@kiln/storage/testing`), so "the same suite runs on both dialects" means one
 * definition of how a test database is made.
 *
 * Each test file does `for (const dialect of DIALECTS) describe(..., { skip: dialect.skip }, ...)`.
 *
 * PostgreSQL needs a server: `KILN_TEST_POSTGRES_URL` names a cluster (as a superuser) on which
 * each test database is created and dropped. Without it the PostgreSQL tests fail, loudly and
 * by design — a suite that silently skipped an engine would pass while proving nothing about
 * it. `KILN_TEST_SKIP_POSTGRES=1` skips them on purpose, and the test output says so.
 *
 *   node scripts/postgres-cluster.mjs -- node --test packages/storage/dist/test/
 *
 * A migrated database is a copy of a template migrated once (`migration-templates.ts`): every
 * test still gets a database of its own, without running every migration for each of them.
 */
import { randomBytes } from "node:crypto";
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DialectName, Storage } from "../dialect.js";
import { type OpenStorageOptions, openStorage } from "../open-storage.js";
import { SQLITE_FILE_NAME } from "../sqlite/open-sqlite-storage.js";
import { administer } from "./cluster-session.js";
import { postgresTemplate, sqliteTemplate } from "./migration-templates.js";

/** What a new test database holds: the current schema (the default), or nothing at all. */
export interface NewTestDatabase {
  /** false: an empty database, for a test of migrating itself. */
  readonly migrated?: boolean;
}

/** One database of a test's own, reachable by several `Storage`s (and by other processes) until disposed. */
export interface TestDatabase {
  /** What `openStorage` needs to reach this database; JSON-serializable for child processes. */
  readonly options: OpenStorageOptions;
  open(extra?: { maxConnections?: number }): Promise<Storage>;
  dispose(): Promise<void>;
}

export interface DialectUnderTest {
  readonly name: DialectName;
  /** A reason when this dialect's tests are skipped on purpose, else false. */
  readonly skip: string | false;
  /** Migrated unless `migrated: false`; `open()` migrates it either way, as a server's start does. */
  createDatabase(options?: NewTestDatabase): Promise<TestDatabase>;
  /** A migrated database with no rows, whose `close()` also deletes it. */
  openFresh(): Promise<Storage>;
}

const sqlite: DialectUnderTest = {
  name: "sqlite",
  skip: false,
  async createDatabase(options) {
    const template = options?.migrated === false ? undefined : await sqliteTemplate();
    const dataDir = await mkdtemp(join(tmpdir(), "kiln-storage-test-"));
    if (template !== undefined) await copyFile(template, join(dataDir, SQLITE_FILE_NAME));
    return {
      options: { dataDir },
      open: () => openStorage({ dataDir }),
      dispose: () => rm(dataDir, { recursive: true, force: true }),
    };
  },
  openFresh: () => openFresh(sqlite),
};

/** PostgreSQL ignores the data dir; this one makes accidental use of it fail. */
const NO_DATA_DIR = "/nonexistent-kiln-data-dir";

const postgres: DialectUnderTest = {
  name: "postgres",
  skip: process.env.KILN_TEST_SKIP_POSTGRES === "1" ? "KILN_TEST_SKIP_POSTGRES=1" : false,
  async createDatabase(options) {
    const { url: databaseUrl, drop } = await createPostgresTestDatabase(options);
    return {
      options: { databaseUrl, dataDir: NO_DATA_DIR },
      open: (extra) => openStorage({ databaseUrl, dataDir: NO_DATA_DIR, ...extra }),
      dispose: drop,
    };
  },
  openFresh: () => openFresh(postgres),
};

export const DIALECTS: readonly DialectUnderTest[] = [sqlite, postgres];

/** A migrated SQLite database with no rows in a temp dir, deleted on `close()`. */
export function openSqliteForTest(): Promise<Storage> {
  return sqlite.openFresh();
}

/**
 * Creates a database `kiln_test_<random>` on the cluster at `KILN_TEST_POSTGRES_URL`: a copy of
 * the migrated template, or empty with `migrated: false`. `drop()` removes it, disconnecting any
 * sessions left.
 */
export async function createPostgresTestDatabase(
  options?: NewTestDatabase,
): Promise<{ url: string; drop(): Promise<void> }> {
  const clusterUrl = process.env.KILN_TEST_POSTGRES_URL;
  if (!clusterUrl) {
    throw new Error(
      "KILN_TEST_POSTGRES_URL is not set, so the PostgreSQL tests cannot run. Start a throwaway cluster: " +
        "`node scripts/postgres-cluster.mjs -- node --test <test dir>`, " +
        "or set KILN_TEST_SKIP_POSTGRES=1 to skip them deliberately.",
    );
  }
  const name = `kiln_test_${randomBytes(6).toString("hex")}`;
  const template = options?.migrated === false ? "" : ` template ${await postgresTemplate(clusterUrl)}`;
  // FILE_COPY copies the template's files; PostgreSQL 15's default (WAL_LOG) writes every block
  // of it to the WAL, which for a few hundred databases a run was most of the cluster's CPU. The
  // checkpoint FILE_COPY asks for costs little on the throwaway cluster (fsync off). Both this
  // and the drop go through the process's one session to the cluster (cluster-session.ts).
  await administer(clusterUrl, `create database ${name}${template} strategy = file_copy`);
  const url = new URL(clusterUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    // FORCE: a test that failed half-way may leave connections open.
    drop: () => administer(clusterUrl, `drop database if exists ${name} with (force)`),
  };
}

async function openFresh(dialect: DialectUnderTest): Promise<Storage> {
  const database = await dialect.createDatabase();
  let storage: Storage;
  try {
    storage = await database.open();
  } catch (error) {
    await database.dispose();
    throw error;
  }
  return {
    ...storage,
    close: async () => {
      try {
        await storage.close();
      } finally {
        await database.dispose();
      }
    },
  };
}
