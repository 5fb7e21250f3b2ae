import { open } from "node:fs/promises";

/** Flushes the WAL file's written pages to the disk (fdatasync). */
export type FlushWal = () => Promise<void>;

/**
 * fdatasync of `<file>-wal` through a descriptor of its own, on libuv's thread pool. On Linux an
 * fsync flushes the file's pages whichever descriptor wrote them, so this makes durable every
 * frame SQLite's connection has appended so far. Opened per flush, so a WAL file that SQLite
 * deleted and made again (when the last connection to it closed) is still the one flushed; no
 * WAL file means nothing waits in one (its frames were checkpointed and the database synced).
 */
export function flushWalFile(databaseFile: string): FlushWal {
  const wal = `${databaseFile}-wal`;
  return async () => {
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(wal, "r+");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw error;
    }
    try {
      await handle.datasync();
    } finally {
      await handle.close();
    }
  };
}

interface Waiter {
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Group commit for SQLite: commits are appended to the WAL without an fsync on the event loop
 * (`synchronous = NORMAL`), and each committer then waits here, off the loop, for a flush that
 * started after its commit — the point where it is acknowledged.
 *
 * Why: better-sqlite3 is synchronous, so with `synchronous = FULL` every commit's fsync blocks
 * the event loop — every tenant's request — for as long as the disk takes, which is longest when
 * a tenant is filling the disk with uploads (reliability trial T15). Here the loop only appends
 * to the WAL (the page cache), and the fsync runs on the thread pool.
 *
 * Batching: a flush covers every commit appended before it started. Callers arriving while one
 * runs wait for the next, which they share, so N commits during one flush cost one more flush,
 * not N. A failed flush fails every commit of its batch (their bytes may not be on disk), and the
 * next caller starts a new one.
 *
 * What it does not give: a reader on this process may see a commit before its flush completes
 * (SQLite makes it visible when it is appended). A power failure in that window loses the commit
 * and what was read of it — never an acknowledged one; a process crash loses nothing (the page
 * cache survives it).
 */
export class WalSync {
  readonly #flush: FlushWal;
  #flushing = false;
  #waiting: Waiter[] = [];
  /** Flushes started so far (a test reads how commits were batched). */
  flushes = 0;

  constructor(flush: FlushWal) {
    this.#flush = flush;
  }

  /** Resolves once a flush that started after this call has completed. */
  sync(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      if (!this.#flushing) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#waiting.length > 0) {
        const batch = this.#waiting;
        this.#waiting = [];
        this.flushes += 1;
        try {
          await this.#flush();
          for (const waiter of batch) waiter.resolve();
        } catch (error) {
          for (const waiter of batch) waiter.reject(error);
        }
      }
    } finally {
      this.#flushing = false;
    }
  }
}
