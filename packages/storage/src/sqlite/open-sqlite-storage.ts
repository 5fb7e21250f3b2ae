import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { join } from "node:path";
import BetterSqlite3 from "better-sqlite3";
import { Kysely } from "kysely";
import type { Capabilities, Storage } from "../dialect.js";
import { listenOnBus, publishNotices } from "../notifications/in-process-notice-bus.js";
import type { Database } from "../schema.js";
import { retryWhileBusy } from "./retry-while-busy.js";
import { createSqliteDialect, type SqliteDurability } from "./sqlite-dialect.js";
import { startWalCheckpointer } from "./wal-checkpointer.js";
import { type FlushWal, flushWalFile, WalSync } from "./wal-sync.js";

export const SQLITE_FILE_NAME = "kiln.sqlite3";

const SQLITE_CAPABILITIES: Capabilities = Object.freeze({
  skipLocked: false,
  returning: true,
  singleWriter: true,
  rowLocks: false,
  multiProcess: true,
  listenNotify: false,
});

/**
 * The database holds every tenant's records (sources' manifests, logs, sealed credentials): no
 * other user of the host may read it. It is created 0600 before SQLite opens it, and SQLite
 * creates its WAL and shared-memory files with the database's own mode; files an earlier
 * version left readable are made 0600 too.
 */
function makeDatabaseFilesPrivate(file: string): void {
  closeSync(openSync(file, "a", 0o600));
  for (const path of [file, `${file}-wal`, `${file}-shm`]) {
    try {
      chmodSync(path, 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
}

/**
 * Opens (creating if needed) `<dataDir>/kiln.sqlite3`. Migrations are run by `openStorage`. With
 * `walCheckpointsOffLoop`, a thread of its own checkpoints the WAL (wal-checkpointer.ts).
 * `flushWal` replaces the WAL file's fdatasync (wal-sync.ts) — for a test that counts flushes.
 */
export async function openSqliteStorage(
  dataDir: string,
  walCheckpointsOffLoop?: { readonly onFailure: (error: Error) => void },
  flushWal?: FlushWal,
): Promise<Storage> {
  // better-sqlite3 13 loads through Node-API 10 (Node.js 22.14 and later): on an older node its
  // constructor crashes the process with a segmentation fault, so the old node is refused here by name.
  if (Number(process.versions.napi) < 10) {
    throw new Error(
      `SQLite storage needs Node.js 22.14 or later (Node-API 10); this is ${process.version}. npm start, npm test and npx kiln-server run kiln on the project's own Node.js (README: Quick start)`,
    );
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = join(dataDir, SQLITE_FILE_NAME);
  makeDatabaseFilesPrivate(file);
  const database = new BetterSqlite3(file);
  try {
    await configureConnection(database);
  } catch (error) {
    database.close();
    throw error;
  }
  const checkpointer =
    walCheckpointsOffLoop === undefined
      ? undefined
      : startWalCheckpointer(database, file, walCheckpointsOffLoop.onFailure);
  const held: { channel: string; payload: string }[] = [];
  // notifyAtCommit's statement (notifications/job-notices.ts): PostgreSQL's pg_notify, here a
  // function of this connection holding the notice until COMMIT (published to this process's
  // bus), dropping it on ROLLBACK, or publishing it at once outside a transaction.
  database.function("pg_notify", (channel: unknown, payload: unknown) => {
    const notice = { channel: String(channel), payload: String(payload) };
    if (database.inTransaction) held.push(notice);
    else publishNotices(file, [notice]);
    return null;
  });
  const hooks = {
    committed: () => publishNotices(file, held.splice(0)),
    rolledBack: () => {
      held.length = 0;
    },
  };
  const durability: SqliteDurability = { walSync: new WalSync(flushWal ?? flushWalFile(file)), relaxed: false };
  const db = new Kysely<Database>({ dialect: createSqliteDialect(database, hooks, durability) });
  return {
    dialect: "sqlite",
    capabilities: SQLITE_CAPABILITIES,
    db,
    transaction: (fn, options) =>
      options?.durability === "relaxed"
        ? // Its commit waits for no flush (sqlite-dialect.ts): marked on the one connection, held
          // throughout, so no other transaction commits while the mark is set.
          db.connection().execute(async (connection) => {
            durability.relaxed = true;
            try {
              return await connection.transaction().execute(fn);
            } finally {
              durability.relaxed = false;
            }
          })
        : db.transaction().execute(fn),
    listen: async (channels, handlers) => {
      const wanted = new Set(channels);
      // Never lost: the bus is this process's own memory.
      const stop = listenOnBus(file, (channel, payload) => {
        if (wanted.has(channel)) handlers.onNotice(channel, payload);
      });
      return {
        backendPid: null,
        close: async () => stop(),
      };
    },
    close: async () => {
      await checkpointer?.stop();
      await db.destroy();
    },
  };
}

async function configureConnection(database: BetterSqlite3.Database): Promise<void> {
  // 0: never sleep inside a synchronous call; the driver waits asynchronously instead, with the
  // same five-second budget (see retry-while-busy.ts).
  database.pragma("busy_timeout = 0");
  // WAL: readers never block the writer and the writer never blocks readers, across processes.
  // Switching a fresh file to WAL needs a brief exclusive lock, hence the retry. The mode is
  // stored in the file, so later opens find it already set.
  const mode = await retryWhileBusy(() => database.pragma("journal_mode = WAL", { simple: true }));
  if (mode !== "wal") {
    throw new Error(`SQLite refused WAL mode (got ${String(mode)}); is the data dir on a network filesystem?`);
  }
  // A commit is on disk (WAL fsynced) before it is acknowledged — receipts, audit and the ledger
  // must survive power loss, not just a process crash — but the fsync is not SQLite's: NORMAL
  // appends commits to the WAL without syncing them on the event loop, and the driver waits for
  // the WAL's flush on the thread pool before the commit's caller goes on (wal-sync.ts).
  database.pragma("synchronous = NORMAL");
  // Off by default in SQLite, per connection.
  database.pragma("foreign_keys = ON");
}
