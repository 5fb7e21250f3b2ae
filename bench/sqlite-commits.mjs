// What SQLite's commits cost the event loop: kiln's group commit (storage/src/sqlite/wal-sync.ts:
// `synchronous = NORMAL`, each committer waiting for an fdatasync of the WAL on the thread pool)
// against the baseline measured in the same run, SQLite's own `synchronous = FULL` (the fsync
// inside the COMMIT, on the loop). Both arms are kiln's storage on a fresh data dir; the baseline
// sets FULL on the connection and stands a no-op for the WAL flush, which is how kiln committed
// before.
//
// Each arm, for --seconds (default 15): --writers (8) loops committing one small row each, back to
// back; one loop committing a --big-bytes row (7.8 MB: an upload manifest of 40,000 files) back to back; and a
// quiet reader selecting one row by key every 20 ms, timed from when it was due (so a loop held
// by a commit shows). Prints commits per second, the quiet read's p50/p99/max, the event loop's
// delay p99/max (perf_hooks), and the group-commit arm over the baseline.
//
//   node bench/sqlite-commits.mjs [--seconds 15] [--writers 8] [--big-bytes 7800000]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { describeMachine } from "./support/machine.mjs";
import { positiveIntegerOption } from "./support/options.mjs";
import { percentile } from "./support/statistics.mjs";

const { openStorage } = await import("@kiln/storage");
const { sql } = await import("kysely");

const SECONDS = positiveIntegerOption("seconds", 15);
const WRITERS = positiveIntegerOption("writers", 8);
// 7.8 MB: a 40,000-file manifest's JSON; about 1.1 MB since manifests are stored compressed.
const BIG_BYTES = positiveIntegerOption("big-bytes", 7_800_000);
const BIG = "m".repeat(BIG_BYTES);

async function arm(name, baseline) {
  const dataDir = mkdtempSync(join(tmpdir(), "kiln-bench-commits-"));
  const storage = await openStorage({
    dataDir,
    walCheckpointsOffLoop: { onFailure: (error) => console.error(`checkpointer: ${error.message}`) },
    ...(baseline ? { sqliteFlushWal: async () => {} } : {}),
  });
  try {
    if (baseline) await sql`pragma synchronous = full`.execute(storage.db);
    await sql`create table bench_rows (id integer primary key, body text not null)`.execute(storage.db);
    await sql`insert into bench_rows (id, body) values (1, 'quiet')`.execute(storage.db);
    const until = Date.now() + SECONDS * 1000;
    let small = 0;
    let big = 0;
    // A request's turn ends with I/O; without this the synchronous baseline's commits would chain
    // on microtasks and never let a timer (the reader) run.
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
    const writer = async () => {
      while (Date.now() < until) {
        await storage.transaction(async (trx) => {
          await sql`insert into bench_rows (body) values ('small')`.execute(trx);
        });
        small += 1;
        await nextTurn();
      }
    };
    const bigWriter = async () => {
      while (Date.now() < until) {
        await storage.transaction(async (trx) => {
          await sql`insert into bench_rows (body) values (${BIG})`.execute(trx);
        });
        big += 1;
        await nextTurn();
      }
    };
    const reads = [];
    const reader = async () => {
      const start = performance.now();
      for (let n = 1; Date.now() < until; n++) {
        const due = start + n * 20;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await sql`select body from bench_rows where id = 1`.execute(storage.db);
        reads.push(performance.now() - due);
      }
    };
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    await Promise.all([...Array.from({ length: WRITERS }, writer), bigWriter(), reader()]);
    delay.disable();
    return {
      name,
      commitsPerSecond: small / SECONDS,
      bigPerSecond: big / SECONDS,
      readP50: percentile(reads, 50),
      readP99: percentile(reads, 99),
      readMax: Math.max(...reads),
      loopP99: delay.percentile(99) / 1e6,
      loopMax: delay.max / 1e6,
    };
  } finally {
    await storage.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const machine = describeMachine();
console.log(
  `sqlite-commits: ${SECONDS} s per arm, ${WRITERS} small writers + one writer of ${BIG_BYTES} bytes + a reader every 20 ms; ${machine.cpus} CPUs, node ${machine.node}, ${machine.date}`,
);
const results = [];
// Baseline, group commit, and each again: the machine's drift shows as the difference between the pairs.
for (const [name, baseline] of [
  ["FULL (baseline)", true],
  ["group commit", false],
  ["FULL (baseline)", true],
  ["group commit", false],
]) {
  const r = await arm(name, baseline);
  results.push(r);
  console.log(
    `${r.name.padEnd(16)} small commits/s ${r.commitsPerSecond.toFixed(0).padStart(6)}, big commits/s ${r.bigPerSecond.toFixed(1).padStart(5)}, quiet read p50 ${r.readP50.toFixed(1)} ms p99 ${r.readP99.toFixed(1)} ms max ${r.readMax.toFixed(1)} ms, loop delay p99 ${r.loopP99.toFixed(1)} ms max ${r.loopMax.toFixed(1)} ms`,
  );
}
const mean = (rows, key) => rows.reduce((n, r) => n + r[key], 0) / rows.length;
const base = results.filter((r) => r.name.startsWith("FULL"));
const group = results.filter((r) => r.name === "group commit");
for (const key of ["commitsPerSecond", "bigPerSecond", "readP99", "readMax", "loopP99", "loopMax"]) {
  console.log(
    `group commit / FULL, ${key}: ${(mean(group, key) / mean(base, key)).toFixed(2)} (means of ${group.length} runs each)`,
  );
}
