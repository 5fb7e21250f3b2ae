#!/usr/bin/env node
// usage.export of 100,000 metering records streams in bounded memory (issue 16).
//
//   npm run build && [KILN_DATABASE_URL=postgres://…] node bench/usage-export.mjs [--records 100000] [--limit 1000]
//     [--heap-cap MiB] [--json FILE]
//
// Setup (this process): a fresh data dir (SQLite, or the PostgreSQL named by KILN_DATABASE_URL),
// one tenant, one job settled through the real storage verbs (acceptJob → claimNextJob →
// finishAttempt, metered by meterAttempt), then `--records` copies of its job and attempt rows
// inserted in batches (each a distinct job started one second apart through November 2026), so
// the ledger holds that many metering records. Then three measurements, each in a child process
// of its own so that each peak RSS (getrusage maxrss, a high-water mark) is that mode's alone:
//
//   baseline  one plain SELECT of the same rows (listMeteredAttempts with limit = all), held in
//             memory — what reading the ledger without paging costs;
//   export    every page of GET /api/usage/export (limit `--limit`, following next_cursor) through
//             the real app (buildApp, Fastify inject), each page's JSON parsed then dropped;
//   report    GET /api/usage once (the report aggregates the same pages server-side).
//
// Every child first builds and readies the same app (and answers one warm-up request) and records
// its RSS high-water mark then ("RSS before"), so each mode's growth is what its reading costs.
// Prints time, peak RSS and growth per mode; the export holds one page at a time, so its growth
// should stay bounded by a page while the baseline's grows with the records.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { dist } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";

const here = fileURLToPath(import.meta.url);
const RECORDS = Number(option("records", "100000"));
const LIMIT = Number(option("limit", "1000"));
const JSON_OUT = option("json", null);
/** `--heap-cap MiB`: each mode's V8 old space is capped (--max-old-space-size), so a mode that held what it read would fail. */
const HEAP_CAP = option("heap-cap", null);
/**
 * `--sqlite-cache-kib K`: on SQLite, each mode sets its connection's page cache, and the temp
 * database's (where DISTINCT and ORDER BY build their b-trees), to K KiB. better-sqlite3 builds
 * SQLite with SQLITE_DEFAULT_CACHE_SIZE=-16000: up to 16,000 KiB for each.
 */
const SQLITE_CACHE_KIB = option("sqlite-cache-kib", null);
const MODE = option("mode", "setup");
const AS_OF = new Date("2026-12-01T00:00:00.000Z");

const { openStorage, listMeteredAttempts } = await import("@kiln/storage");
const peakRssMiB = () => process.resourceUsage().maxRSS / 1024;
/** The heap still reachable now (after a full collection): what the mode holds, not what it left as garbage. */
const liveHeapMiB = () => {
  globalThis.gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

if (MODE === "setup") {
  const dataDir = mkdtempSync(join(tmpdir(), "kiln-bench-usage-"));
  const storage = await openStorage({ dataDir, databaseUrl: process.env.KILN_DATABASE_URL });
  // Imported here, not by the modes' child processes: their memory is what they measure.
  const { insertCopies, settleOneJob } = await import("./support/settled-job-copies.mjs");
  const start = new Date("2026-11-01T00:00:00.000Z");
  const { person, ...settled } = await settleOneJob(storage, dataDir, { start, repository: "bench/usage" });
  const began = performance.now();
  await insertCopies(storage, settled, { from: 1, to: RECORDS, batch: 500, start, finishAttempts: true });
  const seeded = (performance.now() - began) / 1000;
  await storage.close();
  console.log(
    `seeded ${RECORDS} metering records (${process.env.KILN_DATABASE_URL ? "postgresql" : "sqlite"}) in ${seeded.toFixed(1)} s`,
  );

  const results = {};
  for (const mode of ["baseline", "export", "report"]) {
    const child = spawnSync(
      process.execPath,
      [
        "--expose-gc",
        ...(HEAP_CAP === null ? [] : [`--max-old-space-size=${HEAP_CAP}`]),
        here,
        "--mode",
        mode,
        "--limit",
        String(LIMIT),
        "--records",
        String(RECORDS),
        ...(SQLITE_CACHE_KIB === null ? [] : ["--sqlite-cache-kib", SQLITE_CACHE_KIB]),
      ],
      {
        env: { ...process.env, BENCH_DATA_DIR: dataDir, BENCH_TOKEN: person.token, BENCH_TENANT: person.tenant },
        encoding: "utf8",
        maxBuffer: 16 * 2 ** 20,
      },
    );
    // Under --heap-cap a mode that holds what it reads runs out of heap: that is the finding, not an error.
    if (child.status !== 0 && HEAP_CAP !== null && /heap out of memory/.test(child.stderr)) {
      results[mode] = { outOfMemory: true };
      continue;
    }
    if (child.status !== 0) throw new Error(`${mode} failed: ${child.stderr}`);
    if (process.env.BENCH_TRACE) process.stderr.write(child.stderr);
    results[mode] = JSON.parse(child.stdout.trim().split("\n").at(-1));
  }
  console.log("");
  console.log(
    "| mode | records | pages | time (s) | RSS before (MiB) | peak RSS (MiB) | RSS growth (MiB) | live heap growth (MiB) | V8 heap committed growth (MiB) | RSS outside V8 heap growth (MiB) |",
  );
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const [mode, r] of Object.entries(results)) {
    if (r.outOfMemory) {
      console.log(`| ${mode} | — | — | — | — | — | — | out of heap at --max-old-space-size=${HEAP_CAP} | — | — |`);
      continue;
    }
    console.log(
      `| ${mode} | ${r.records} | ${r.pages} | ${r.seconds.toFixed(2)} | ${r.floorRssMiB.toFixed(0)} | ` +
        `${r.peakRssMiB.toFixed(0)} | ${(r.peakRssMiB - r.floorRssMiB).toFixed(0)} | ${(r.maxHeapMiB - r.floorHeapMiB).toFixed(1)} | ` +
        `${(r.maxHeapTotalMiB - r.floorHeapTotalMiB).toFixed(0)} | ${(r.maxOutsideHeapMiB - r.floorOutsideHeapMiB).toFixed(0)} |`,
    );
  }
  if (HEAP_CAP !== null) console.log(`\n(each mode ran with --max-old-space-size=${HEAP_CAP})`);
  console.log(`(SQLite page cache, main and temp: ${results.export.sqliteCache ?? "n/a"})`);
  const ran = Object.values(results).filter((r) => !r.outOfMemory);
  if (ran.some((r) => r.records !== RECORDS)) {
    throw new Error(`expected ${RECORDS} records in every mode, got ${JSON.stringify(results)}`);
  }
  if (results.export.outOfMemory || results.report.outOfMemory) {
    throw new Error(`the export or the report ran out of heap: ${JSON.stringify(results)}`);
  }
  if (results.export.vcpuSeconds !== results.report.vcpuSeconds) {
    throw new Error(`export totals ${results.export.vcpuSeconds} ≠ report ${results.report.vcpuSeconds}`);
  }
  if (JSON_OUT !== null) writeFileSync(JSON_OUT, JSON.stringify({ records: RECORDS, limit: LIMIT, results }, null, 2));
  rmSync(dataDir, { recursive: true, force: true });
} else {
  const dataDir = process.env.BENCH_DATA_DIR;
  const storage = await openStorage({ dataDir, databaseUrl: process.env.KILN_DATABASE_URL });
  let sqliteCache = null;
  if (storage.dialect === "sqlite") {
    const { sql } = await import("kysely");
    if (SQLITE_CACHE_KIB !== null) {
      // One connection (the SQLite storage holds one), so the pragmas hold for every request.
      await sql.raw(`pragma cache_size = -${Number(SQLITE_CACHE_KIB)}`).execute(storage.db);
      await sql.raw(`pragma temp.cache_size = -${Number(SQLITE_CACHE_KIB)}`).execute(storage.db);
    }
    const main = (await sql.raw("pragma cache_size").execute(storage.db)).rows[0];
    const temp = (await sql.raw("pragma temp.cache_size").execute(storage.db)).rows[0];
    sqliteCache = `main ${JSON.stringify(main)}, temp ${JSON.stringify(temp)}`;
  }
  // Every mode loads and readies the same app first, so the peaks differ by what each mode reads.
  const { buildApp } = await import(dist("src/build-app.js"));
  const { LocalBlobStore } = await import("@kiln/storage");
  const clock = { now: () => new Date(AS_OF), after: () => ({ cancel() {} }), sleep: () => new Promise(() => {}) };
  const app = buildApp({
    storage,
    blobs: new LocalBlobStore(join(dataDir, "blobs")),
    clock,
    version: "bench",
    publicOrigin: "http://kiln.bench",
    wakeScheduler: () => {},
    logger: false,
  });
  await app.ready();
  /**
   * process.memoryUsage() split: V8's committed heap (heapTotal: live objects and garbage not yet
   * collected) and the rest of RSS (native memory: SQLite's page cache, libpq and socket buffers,
   * malloc, code). Sampled after every response (a request on SQLite never yields, so a timer could
   * not sample during one); the high-water marks are kept.
   */
  let maxHeapTotalMiB = 0;
  let maxOutsideHeapMiB = 0;
  const sampleMemory = () => {
    const m = process.memoryUsage();
    maxHeapTotalMiB = Math.max(maxHeapTotalMiB, m.heapTotal / 2 ** 20);
    maxOutsideHeapMiB = Math.max(maxOutsideHeapMiB, (m.rss - m.heapTotal) / 2 ** 20);
  };
  const get = async (url) => {
    const res = await app.inject({
      method: "GET",
      url,
      headers: { authorization: `Bearer ${process.env.BENCH_TOKEN}` },
    });
    if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
    const body = res.json();
    // Let the event loop turn once, as it does between requests on a real connection. inject()'s
    // socket finishes each write in a setImmediate that still holds the response's payload; on
    // SQLite every statement completes in microtasks, so a loop of injects that never yields
    // never reaches the check phase and keeps every page's payload (0.27 MiB a page) alive.
    await new Promise((resolve) => setImmediate(resolve));
    sampleMemory();
    return body;
  };
  // Warm the request path once (route compilation, first statements) outside the measurement.
  await get("/api/usage/export?period=2026-10&limit=1");
  const floorRssMiB = peakRssMiB();
  const floorHeapMiB = liveHeapMiB();
  const floor = process.memoryUsage();
  const floorHeapTotalMiB = floor.heapTotal / 2 ** 20;
  const floorOutsideHeapMiB = (floor.rss - floor.heapTotal) / 2 ** 20;
  let maxHeapMiB = floorHeapMiB;
  const began = performance.now();
  let result;
  if (MODE === "baseline") {
    const page = await listMeteredAttempts(storage, {
      tenantId: process.env.BENCH_TENANT,
      from: "2026-11-01T00:00:00.000Z",
      to: "2026-12-01T00:00:00.000Z",
      settledBy: AS_OF.toISOString(),
      limit: RECORDS + 1,
    });
    sampleMemory();
    maxHeapMiB = Math.max(maxHeapMiB, liveHeapMiB());
    result = { records: page.rows.length, pages: 1, vcpuSeconds: null };
  } else if (MODE === "export") {
    let url = `/api/usage/export?period=2026-11&limit=${LIMIT}`;
    let records = 0;
    let pages = 0;
    let vcpuSeconds = null;
    for (;;) {
      const page = await get(url);
      pages += 1;
      records += page.records.length;
      if (page.totals !== null) vcpuSeconds = page.totals.vcpu_seconds;
      // Sampled every tenth page, the page in hand still referenced (a collection per page would dominate the time).
      if (pages % 10 === 1) {
        const live = liveHeapMiB();
        if (process.env.BENCH_TRACE) console.error(`page ${pages}: live heap ${live.toFixed(1)} MiB`);
        maxHeapMiB = Math.max(maxHeapMiB, live);
      }
      if (page.next_cursor === null) break;
      url = `/api/usage/export?cursor=${page.next_cursor}&limit=${LIMIT}`;
    }
    result = { records, pages, vcpuSeconds };
  } else {
    const report = await get("/api/usage?period=2026-11");
    result = { records: report.totals.attempts, pages: 1, vcpuSeconds: report.totals.vcpu_seconds };
  }
  const seconds = (performance.now() - began) / 1000;
  const peak = peakRssMiB();
  await app.close();
  await storage.close();
  console.log(
    JSON.stringify({
      ...result,
      seconds,
      floorRssMiB,
      peakRssMiB: peak,
      floorHeapMiB,
      maxHeapMiB,
      floorHeapTotalMiB,
      maxHeapTotalMiB: Math.max(maxHeapTotalMiB, floorHeapTotalMiB),
      floorOutsideHeapMiB,
      maxOutsideHeapMiB: Math.max(maxOutsideHeapMiB, floorOutsideHeapMiB),
      sqliteCache,
    }),
  );
}
