import type { Storage } from "./dialect.js";
import { migrateToLatest } from "./migrations/migrate-to-latest.js";
import { openPostgresStorage } from "./postgres/open-postgres-storage.js";
import { openSqliteStorage } from "./sqlite/open-sqlite-storage.js";
import type { FlushWal } from "./sqlite/wal-sync.js";

export interface OpenStorageOptions {
  /** `postgres://…` or `postgresql://…`; absent or empty for the embedded SQLite database. */
  databaseUrl?: string;
  /** Holds `kiln.sqlite3` when no database URL is given; created if missing. */
  dataDir: string;
  /** PostgreSQL pool size (default 10); ignored for SQLite, which has one connection. */
  maxConnections?: number;
  /**
   * SQLite only: checkpoint the WAL from a thread of its own, off the event loop
   * (sqlite/wal-checkpointer.ts), telling `onFailure` when it cannot (SQLite then checkpoints on
   * the committing connection again). Without it, SQLite's automatic checkpoints run at commit.
   */
  walCheckpointsOffLoop?: { readonly onFailure: (error: Error) => void };
  /**
   * SQLite only, for tests: what stands for the fdatasync of the WAL that every acknowledged
   * commit waits for (sqlite/wal-sync.ts), so a test can count or hold the flushes.
   */
  sqliteFlushWal?: FlushWal;
}

/**
 * Opens the database the options name and migrates it to the latest schema before returning.
 * A database URL with any other scheme is refused rather than silently falling back to SQLite.
 */
export async function openStorage(options: OpenStorageOptions): Promise<Storage> {
  const storage = await openUnmigrated(options);
  try {
    await migrateToLatest(storage);
  } catch (error) {
    await storage.close();
    throw error;
  }
  return storage;
}

function openUnmigrated(options: OpenStorageOptions): Promise<Storage> {
  const url = options.databaseUrl?.trim();
  if (!url) {
    return openSqliteStorage(options.dataDir, options.walCheckpointsOffLoop, options.sqliteFlushWal);
  }
  if (/^postgres(ql)?:\/\//i.test(url)) {
    return openPostgresStorage({ databaseUrl: url, maxConnections: options.maxConnections });
  }
  throw new Error(`unsupported database URL scheme in ${redact(url)}: expected postgres:// or postgresql://`);
}

/** Never echo a password from a connection string into logs. */
function redact(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@]*@/, "//$1:***@");
}
