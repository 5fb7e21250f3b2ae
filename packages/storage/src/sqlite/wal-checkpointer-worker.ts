/**
 * The WAL checkpointer's thread (wal-checkpointer.ts): its own connection to the database file,
 * checkpointing every `everyMs`, blocking nothing but this thread. PASSIVE never waits for a
 * reader or the writer; it copies what it can and the next pass takes the rest.
 */
import { parentPort, workerData } from "node:worker_threads";
import BetterSqlite3 from "better-sqlite3";

const { file, everyMs } = workerData as { file: string; everyMs: number };
const database = new BetterSqlite3(file);
// This connection only checkpoints; waiting for a lock here stalls no request.
database.pragma("busy_timeout = 5000");
database.pragma("wal_autocheckpoint = 0");

const timer = setInterval(() => {
  try {
    database.pragma("wal_checkpoint(PASSIVE)");
  } catch (error) {
    parentPort?.postMessage({ failed: error instanceof Error ? error.message : String(error) });
  }
}, everyMs);

parentPort?.on("message", (message: unknown) => {
  if (message !== "stop") return;
  clearInterval(timer);
  database.close();
  parentPort?.close();
});
