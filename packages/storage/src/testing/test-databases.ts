/**
 * Throwaway databases for tests, on every engine — shared by this package's tests and by other
 * packages' (`@kiln/storage/testing`), so "the same suite runs on both dialects" means one
 * definition of how a test database is made.
 *
 * Each test file does `for (const dialect of DIALECTS) describe(..., { skip: dialect.skip }, ...)`.
 *
 * PostgreSQL needs a server: `KILN_TEST_POSTGRES_URL` names a cluster (as a superuser) on which
 * each test database is made (then dropped, or emptied for the next test). Without it the
 * PostgreSQL tests fail, loudly and by design — a suite that silently skipped an engine would
 * pass while proving nothing about it. `KILN_TEST_SKIP_POSTGRES=1` skips them on purpose, and
 * the test output says so.
 *
 *   node scripts/postgres-cluster.mjs -- node --test packages/storage/dist/test/
 *
 * A migrated database is a copy of a template migrated once (`migration-templates.ts`), and on
 * PostgreSQL one a test is done with is emptied for the next (`reused-postgres-databases.ts`):
 * every test still gets a database of its own with no rows, without running every migration or
 * copying the template for each of them.
 */
import { copyFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DialectName, Storage } from "../dialect.js";
import { type OpenStorageOptions, openStorage } from "../open-storage.js";
import { SQLITE_FILE_NAME } from "../sqlite/open-sqlite-storage.js";
import { postgresTemplate, sqliteTemplate } from "./migration-templates.js";
import {
  administer,
  emptyThrough,
  giveBackMigratedDatabase,
  takeMigratedDatabase,
  testDatabaseName,
} from "./reused-postgres-databases.js";

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
  /**
   * Closes `storage`, the last one open on this database, and disposes of the database: on
   * PostgreSQL it is emptied through that storage's session first, which saves opening another.
   */
  disposeWith(storage: Storage): Promise<void>;
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
    const dispose = () => rm(dataDir, { recursive: true, force: true });
    return {
      options: { dataDir },
      open: () => openStorage({ dataDir }),
      dispose,
      disposeWith: async (storage) => {
        try {
          await storage.close();
        } finally {
          await dispose();
        }
      },
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
    const { clusterUrl, url: databaseUrl, drop, name } = await postgresTestDatabase(options);
    return {
      options: { databaseUrl, dataDir: NO_DATA_DIR },
      open: (extra) => openStorage({ databaseUrl, dataDir: NO_DATA_DIR, ...extra }),
      dispose: drop,
      disposeWith: async (storage) => {
        if (name === undefined) {
          try {
            await storage.close();
          } finally {
            await drop();
          }
          return;
        }
        let emptied = false;
        try {
          emptied = await emptyThrough(clusterUrl, storage.db);
        } finally {
          try {
            await storage.close();
          } finally {
            await giveBackMigratedDatabase(clusterUrl, name, { emptied });
          }
        }
      },
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
 * A database `kiln_test_<random>` of the caller's own on the cluster at `KILN_TEST_POSTGRES_URL`:
 * a migrated one with no rows (reused-postgres-databases.ts: emptied after an earlier test, or a
 * copy of the migrated template), or a new empty one with `migrated: false`. `drop()` ends any
 * sessions left on it and drops it, or empties it for the next test.
 */
export async function createPostgresTestDatabase(
  options?: NewTestDatabase,
): Promise<{ url: string; drop(): Promise<void> }> {
  const { url, drop } = await postgresTestDatabase(options);
  return { url, drop };
}

/** As createPostgresTestDatabase, with the cluster and, when migrated, the name to give it back by. */
async function postgresTestDatabase(options?: NewTestDatabase) {
  const clusterUrl = process.env.KILN_TEST_POSTGRES_URL;
  if (!clusterUrl) {
    throw new Error(
      "KILN_TEST_POSTGRES_URL is not set, so the PostgreSQL tests cannot run. Start a throwaway cluster: " +
        "`node scripts/postgres-cluster.mjs -- node --test <test dir>`, " +
        "or set KILN_TEST_SKIP_POSTGRES=1 to skip them deliberately.",
    );
  }
  const urlOf = (database: string) => {
    const url = new URL(clusterUrl);
    url.pathname = `/${database}`;
    return url.toString();
  };
  if (options?.migrated === false) {
    const empty = testDatabaseName();
    await administer(clusterUrl, `create database ${empty}`);
    return {
      clusterUrl,
      url: urlOf(empty),
      name: undefined,
      // FORCE: a test that failed half-way may leave connections open.
      drop: () => administer(clusterUrl, `drop database if exists ${empty} with (force)`),
    };
  }
  const name = await takeMigratedDatabase(clusterUrl, await postgresTemplate(clusterUrl));
  return { clusterUrl, url: urlOf(name), name, drop: () => giveBackMigratedDatabase(clusterUrl, name) };
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
  return { ...storage, close: () => database.disposeWith(storage) };
}
