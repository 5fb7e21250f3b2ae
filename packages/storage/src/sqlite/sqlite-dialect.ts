import type BetterSqlite3 from "better-sqlite3";
import {
  type CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from "kysely";
import { retryWhileBusy } from "./retry-while-busy.js";
import type { WalSync } from "./wal-sync.js";

/**
 * Kysely's SQLite dialect, changed where several *processes* share one file (1, 2) and where the
 * event loop would wait for the disk (3):
 *
 * 1. Transactions begin with `BEGIN IMMEDIATE`, not Kysely's plain (deferred) `BEGIN`.
 *    A deferred transaction takes only a read snapshot at its first read and tries to upgrade
 *    to the write lock at its first write. If another process committed in between, the upgrade
 *    cannot succeed (the snapshot is stale) and SQLite answers SQLITE_BUSY(_SNAPSHOT) at once —
 *    no busy timeout helps, the transaction has to be retried from the top. With
 *    `BEGIN IMMEDIATE` the write lock is taken before the first read, so a transaction either
 *    waits at `BEGIN` (harmless, nothing done yet) or runs to the end without conflict.
 *    The price: write transactions are serialized database-wide (`capabilities.singleWriter`).
 *
 * 2. Waiting for the lock is asynchronous (`retryWhileBusy`), because better-sqlite3 is
 *    synchronous and SQLite's own busy handler would block the event loop while it waits.
 *    Statements inside a transaction are not retried: under `BEGIN IMMEDIATE` in WAL mode they
 *    never meet SQLITE_BUSY, and if one ever did, re-running it alone would be wrong.
 *
 * Within one process, Kysely already serializes all use of the single connection (the mutex
 * below), so concurrent callers queue instead of contending.
 *
 * 3. A write is acknowledged only once the WAL holding it is on disk, but the fsync is not made on
 *    the event loop: the connection runs at `synchronous = NORMAL` (SQLite appends commits to the
 *    WAL without syncing them) and, when a connection that wrote is released — after its COMMIT,
 *    or after a write outside a transaction — the caller waits for the WalSync's next flush on the
 *    thread pool (wal-sync.ts). The connection is released first, so other queries run while
 *    the disk works. A transaction run with `relaxed` durability does not wait.
 *
 * The adapter also reports transactional DDL (SQLite has it; Kysely's adapter says no, to be
 * safe for other SQLite drivers). That makes the Migrator run migrations inside one
 * `BEGIN IMMEDIATE` transaction, so the write lock doubles as the migration lock when two
 * processes open a fresh file at once.
 */
export function createSqliteDialect(
  database: BetterSqlite3.Database,
  hooks: TransactionHooks = NO_HOOKS,
  durability?: SqliteDurability,
): Dialect {
  return {
    createDriver: (): Driver => new ImmediateTransactionSqliteDriver(database, hooks, durability),
    createQueryCompiler: (): QueryCompiler => new SqliteQueryCompiler(),
    createAdapter: (): DialectAdapter => new TransactionalDdlSqliteAdapter(),
    createIntrospector: (db: Kysely<unknown>): DatabaseIntrospector => new SqliteIntrospector(db),
  };
}

/** What runs when a transaction ends: the held notices go out after COMMIT, or are dropped (open-sqlite-storage.ts). */
export interface TransactionHooks {
  readonly committed: () => void;
  readonly rolledBack: () => void;
}

const NO_HOOKS: TransactionHooks = { committed: () => {}, rolledBack: () => {} };

/**
 * How writes are made durable (point 3 above). `relaxed` is set by the storage around a
 * transaction run with relaxed durability, while it holds the one connection.
 */
export interface SqliteDurability {
  readonly walSync: WalSync;
  relaxed: boolean;
}

class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

class ImmediateTransactionSqliteDriver implements Driver {
  readonly #connection: SqliteConnection;
  readonly #mutex = new ConnectionMutex();
  readonly #hooks: TransactionHooks;
  readonly #durability: SqliteDurability | undefined;
  /** Whether the connection's holder wrote something not yet flushed that it must wait for. */
  #unflushed = false;

  constructor(database: BetterSqlite3.Database, hooks: TransactionHooks, durability: SqliteDurability | undefined) {
    this.#durability = durability;
    this.#connection = new SqliteConnection(database, () => {
      this.#unflushed = true;
    });
    this.#hooks = hooks;
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.#mutex.lock();
    return this.#connection;
  }

  async beginTransaction(): Promise<void> {
    // Isolation settings are ignored: SQLite transactions are serializable.
    await this.#connection.run("begin immediate");
  }

  async commitTransaction(): Promise<void> {
    await this.#connection.run("commit");
    if (this.#durability?.relaxed === false) this.#unflushed = true;
    this.#hooks.committed();
  }

  async rollbackTransaction(): Promise<void> {
    // Dropped first: whether or not the ROLLBACK statement itself succeeds, nothing committed.
    this.#hooks.rolledBack();
    await this.#connection.run("rollback");
  }

  async releaseConnection(): Promise<void> {
    const wait = this.#unflushed && this.#durability !== undefined;
    this.#unflushed = false;
    // Released before the flush: the next query runs while this caller waits for the disk.
    this.#mutex.unlock();
    if (wait) await this.#durability?.walSync.sync();
  }

  async destroy(): Promise<void> {
    this.#connection.close();
  }
}

/** Prepared statements kept per connection: the queries are a fixed set of shapes. */
const CACHED_STATEMENTS = 512;

class SqliteConnection implements DatabaseConnection {
  readonly #db: BetterSqlite3.Database;
  /**
   * Preparing costs about as much as running a small statement, and Kysely compiles the same
   * SQL text for every call of a query, so statements are prepared once per text (least
   * recently used out first; a statement list in IN (...) can make many texts).
   */
  readonly #statements = new Map<string, BetterSqlite3.Statement>();
  /** Called for a statement that may write, run outside a transaction (its own commit). */
  readonly #wroteOutsideTransaction: () => void;

  constructor(db: BetterSqlite3.Database, wroteOutsideTransaction: () => void) {
    this.#db = db;
    this.#wroteOutsideTransaction = wroteOutsideTransaction;
  }

  async run(sqlText: string): Promise<void> {
    await this.#execute(() => {
      this.#prepared(sqlText).run();
    });
  }

  #prepared(sqlText: string): BetterSqlite3.Statement {
    let statement = this.#statements.get(sqlText);
    if (statement !== undefined) {
      this.#statements.delete(sqlText);
    } else {
      statement = this.#db.prepare(sqlText);
      if (this.#statements.size >= CACHED_STATEMENTS) {
        const oldest = this.#statements.keys().next().value;
        if (oldest !== undefined) this.#statements.delete(oldest);
      }
    }
    this.#statements.set(sqlText, statement);
    return statement;
  }

  close(): void {
    this.#db.close();
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const { sql, parameters } = compiledQuery;
    return this.#execute((): QueryResult<R> => {
      const statement = this.#prepared(sql);
      // `readonly`, not `reader`: an INSERT … RETURNING is a reader that writes.
      if (!statement.readonly && !this.#db.inTransaction) this.#wroteOutsideTransaction();
      if (statement.reader) {
        return { rows: statement.all(parameters) as R[] };
      }
      const { changes, lastInsertRowid } = statement.run(parameters);
      return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
    });
  }

  async *streamQuery<R>(compiledQuery: CompiledQuery, chunkSize = 100): AsyncIterableIterator<QueryResult<R>> {
    // Rows are materialized first: a live better-sqlite3 iterator would hold the read snapshot
    // across the consumer's awaits. The tables here are small per query; nothing streams yet.
    const { rows } = await this.executeQuery<R>(compiledQuery);
    for (let start = 0; start < rows.length; start += chunkSize) {
      yield { rows: rows.slice(start, start + chunkSize) };
    }
  }

  /** Retries SQLITE_BUSY only outside a transaction, where it means nothing was done. */
  #execute<T>(attempt: () => T): Promise<T> {
    if (this.#db.inTransaction) {
      return Promise.resolve().then(attempt);
    }
    return retryWhileBusy(attempt);
  }
}

/** The single connection's lock, as in Kysely's own SqliteDriver. */
class ConnectionMutex {
  #held: Promise<void> | undefined;
  #release: (() => void) | undefined;

  async lock(): Promise<void> {
    while (this.#held) {
      await this.#held;
    }
    this.#held = new Promise((resolve) => {
      this.#release = resolve;
    });
  }

  unlock(): void {
    const release = this.#release;
    this.#held = undefined;
    this.#release = undefined;
    release?.();
  }
}
