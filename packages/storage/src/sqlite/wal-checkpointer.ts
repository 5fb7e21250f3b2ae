import { Worker } from "node:worker_threads";
import type BetterSqlite3 from "better-sqlite3";

/** SQLite's own default, restored on the event loop's connection when the thread fails. */
const AUTOCHECKPOINT_PAGES = 1000;
/** How often the thread checkpoints: the WAL grows by at most this long's writes between passes. */
const EVERY_MS = 250;

export interface WalCheckpointer {
  stop(): Promise<void>;
}

/**
 * Checkpoints the WAL from a thread of its own instead of the connection that commits.
 *
 * better-sqlite3 is synchronous, and SQLite checkpoints automatically at the commit that takes
 * the WAL past 1,000 pages: copying the WAL's pages into the database file and fsyncing both,
 * on the event loop, in whichever request happened to commit then. A 7.8 MB upload manifest is
 * twice that threshold, so every such reservation paid a checkpoint of its own, and while another
 * tenant fills the disk each fsync waits behind its writes (reliability trial T15). Here the
 * event loop's connection stops checkpointing (`wal_autocheckpoint = 0`) and a worker thread
 * checkpoints every 250 ms on a connection of its own. Durability is unchanged: every commit
 * is still in a flushed WAL before it is acknowledged (wal-sync.ts); a checkpoint only moves
 * committed pages into the database file.
 *
 * If the thread fails or exits, the event loop's connection checkpoints again as SQLite's
 * default has it, and `onFailure` hears why — the WAL never grows without bound unnoticed.
 */
export function startWalCheckpointer(
  database: BetterSqlite3.Database,
  file: string,
  onFailure: (error: Error) => void,
): WalCheckpointer {
  const worker = new Worker(new URL("./wal-checkpointer-worker.js", import.meta.url), {
    workerData: { file, everyMs: EVERY_MS },
  });
  database.pragma("wal_autocheckpoint = 0");
  let stopping = false;
  let fellBack = false;
  const fallBack = (error: Error) => {
    if (stopping) return;
    if (!fellBack && database.open) database.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    fellBack = true;
    onFailure(error);
  };
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  worker.on("message", (message: { failed?: string }) => {
    if (message.failed !== undefined) onFailure(new Error(`a WAL checkpoint failed: ${message.failed}`));
  });
  worker.on("error", (error) => fallBack(error));
  worker.on("exit", (code) => fallBack(new Error(`the WAL checkpointer thread exited (code ${code})`)));
  // The thread never keeps the process alive on its own.
  worker.unref();
  return {
    stop: async () => {
      stopping = true;
      // Held by its exit until it has closed its connection.
      worker.ref();
      worker.postMessage("stop");
      await exited;
    },
  };
}
