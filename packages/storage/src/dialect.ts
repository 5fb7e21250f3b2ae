import type { Kysely, Transaction } from "kysely";
import type { NoticeConnection, NoticeHandlers } from "./notifications/notice-connection.js";
import type { Database } from "./schema.js";

export type DialectName = "sqlite" | "postgres";

/**
 * What the engine under a `Storage` can do. Code outside this package branches on these flags,
 * never on the dialect name, so that a behaviour difference is stated once, here, with its reason.
 */
export interface Capabilities {
  /**
   * `SELECT … FOR UPDATE SKIP LOCKED` exists, so several workers can claim different rows of one
   * queue concurrently. SQLite has no row locks; there a claim is a single conditional UPDATE
   * under the database-wide write lock.
   */
  readonly skipLocked: boolean;
  /**
   * `INSERT/UPDATE/DELETE … RETURNING` exists. True on both engines (SQLite ≥ 3.35; the bundled
   * better-sqlite3 ships a newer one); kept so a verb can state that it relies on it.
   */
  readonly returning: boolean;
  /**
   * Only one transaction writes at a time, database-wide (SQLite). Every transaction takes the
   * write lock when it begins, so read-then-write logic inside a transaction cannot be raced,
   * but a long transaction stalls every other writer, in this process and in others.
   * False on PostgreSQL: transactions run concurrently at READ COMMITTED, and read-then-write
   * logic needs row locks (`rowLocks`) or a conditional write.
   */
  readonly singleWriter: boolean;
  /** `SELECT … FOR UPDATE` row locks exist (PostgreSQL). */
  readonly rowLocks: boolean;
  /**
   * Several processes may share the database (PostgreSQL over the network; SQLite through one
   * file on one machine). Always true today; stated so verbs that rely on it say so.
   */
  readonly multiProcess: boolean;
  /**
   * `LISTEN/NOTIFY` exists, so a process can be woken by another's commit instead of polling.
   * On SQLite notices reach only the committing process (`Storage.listen`), so a waiter there
   * is woken by this process's writes and polls for anyone else's.
   */
  readonly listenNotify: boolean;
}

export interface TransactionOptions {
  /**
   * "full" (the default): acknowledged means on disk. "relaxed": the commit is ordered and never
   * torn, but a power failure (not a process crash) may lose it. Only for writes whose loss
   * costs a repeat, never for receipts, audit, billing or job state: a source part's record,
   * whose blob is not fsynced either, so losing both only means the client sends the part again.
   * SQLite: the commit does not wait for the WAL's flush (sqlite/wal-sync.ts; the WAL is
   * appended, and fsynced by the next full commit's flush or checkpoint). PostgreSQL:
   * `SET LOCAL synchronous_commit = off`.
   */
  readonly durability?: "full" | "relaxed";
}

export interface Storage {
  readonly dialect: DialectName;
  readonly capabilities: Capabilities;
  readonly db: Kysely<Database>;
  /**
   * Runs `fn` in one transaction, committing when it resolves and rolling back when it throws.
   * SQLite: `BEGIN IMMEDIATE` (the write lock is taken at the start; see `sqlite/`).
   * PostgreSQL: `BEGIN` at READ COMMITTED.
   */
  transaction<T>(fn: (trx: Transaction<Database>) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * Opens a listening end for the notices writers commit on `channels` (notifications/): on
   * PostgreSQL a dedicated connection (not from the pool) that LISTENs; on SQLite this
   * process's bus for the file. Use one per process through `startJobNotifications`.
   */
  listen(channels: readonly string[], handlers: NoticeHandlers): Promise<NoticeConnection>;
  /** Releases the connection(s); the `Storage` is unusable afterwards. */
  close(): Promise<void>;
}
