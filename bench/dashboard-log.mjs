#!/usr/bin/env node
// The job page with a log of 100,000 lines, in Debian's chromium (issue 20: "a log of 100,000
// lines renders and follows without freezing the page (virtualised or paged)").
//
//   npm run build && node bench/dashboard-log.mjs [--lines 100000] [--batch 1000] [--json FILE]
//
// kiln runs in this process (buildApp on a fresh SQLite data dir, listening on 127.0.0.1), a
// person signs in through a one-time sign-in link in the browser, and two jobs get `--lines`
// log lines through the storage verbs a host's log shipping uses (appendLogRecords, `--batch`
// lines at a time), every tenth line coloured with ANSI codes:
//
// 1. settled: the job's log is complete before the page opens. Measured: navigation to first
//    contentful paint and to the load event, the page's JS heap and DOM nodes after load. The page
//    renders the log's first page (1,000 lines) and links the next; the whole log never is one
//    document.
// 2. following: the page of a running job with no lines yet is open while the lines arrive. The
//    page script follows jobs.logs_stream (pages of up to 1,000 records), keeping the newest 5,000
//    lines in the document. Measured: time from the first append until the last line is on the
//    page, the longest main-thread task meanwhile (a PerformanceObserver of `longtask` entries:
//    the page's longest freeze), the page's JS heap and DOM nodes at the end.
// 3. search: the settled log searched whole (jobs.logs_search; no hit, and a hit on its last line)
//    against the baseline of reading every page of jobs.logs (what finding a line took before),
//    and the raw log.txt download.
//
// Figures vary with the machine and its load; this prints them, it does not judge them.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { dist } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";

const { LocalBlobStore, addPersonToTenant, appendLogRecords, createTenant, openStorage } = await import(
  "@kiln/storage"
);
const { systemClock } = await import("@kiln/contract");
const { chromium } = await import("playwright-core");
const { buildApp } = await import(dist("src/build-app.js"));
const { mintSignInLink } = await import(dist("src/admin/mint-sign-in-link.js"));
const { acceptJob, claimJob, finishJob } = await import(dist("src/testing/job-fixtures.js"));

const LINES = Number(option("lines", "100000"));
const BATCH = Number(option("batch", "1000"));
const JSON_OUT = option("json", null);
const CHROMIUM = "/usr/bin/chromium";
const MiB = 2 ** 20;

const dataDir = mkdtempSync(join(tmpdir(), "kiln-bench-dashboard-log-"));
const storage = await openStorage({ dataDir });
const blobs = new LocalBlobStore(join(dataDir, "blobs"));

// The origin must be known before the app is built (Origin checks, sign-in links).
const { createServer } = await import("node:http");
const server = createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const base = `http://127.0.0.1:${server.address().port}`;
const app = buildApp({ storage, clock: systemClock, blobs, version: "bench", publicOrigin: base, logger: false });
await app.ready();
server.on("request", (request, response) => app.routing(request, response));

const tenant = "bench";
await createTenant(storage, { id: tenant, displayName: "Bench" }, new Date());
await addPersonToTenant(storage, { tenantId: tenant, email: "ann@bench.example", role: "member" }, new Date());

/** Line `n` of the log: cargo-like text, every tenth coloured. */
const lineText = (n) =>
  n % 10 === 0
    ? `\u001b[1m\u001b[32m   Compiling\u001b[0m crate-${n} v0.1.${n % 97} (/src/crate-${n})`
    : `test module_${n % 113}::case_${n} ... ok`;

async function appendAll(lease) {
  for (let from = 1; from <= LINES; from += BATCH) {
    const lines = [];
    for (let n = from; n < from + BATCH && n <= LINES; n += 1)
      lines.push({ stream: "stdout", at: new Date(), text: lineText(n) });
    if (!(await appendLogRecords(storage, { ...lease, lines }))) throw new Error("the lease fenced the append");
  }
}

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--enable-precise-memory-info"],
});
const results = {};
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Performance.enable");
  const metrics = async () => {
    // Collected first: detached nodes and garbage would otherwise count until V8 gets to them.
    await cdp.send("HeapProfiler.collectGarbage");
    const { metrics: list } = await cdp.send("Performance.getMetrics");
    const of = (name) => list.find((m) => m.name === name)?.value ?? 0;
    return { heapMiB: of("JSHeapUsedSize") / MiB, nodes: of("Nodes") };
  };
  await page.goto(await mintSignInLink(storage, base, "ann@bench.example"));

  // 1. settled
  const settledJob = await acceptJob(storage, { tenant, now: new Date() });
  const settledLease = await claimJob(storage, settledJob.id, new Date(), 3600);
  let started = performance.now();
  await appendAll(settledLease);
  const appendSeconds = (performance.now() - started) / 1000;
  await finishJob(storage, blobs, settledLease, { now: new Date() });
  await page.goto(`${base}/jobs/${settledJob.id}`, { waitUntil: "load" });
  await page.waitForSelector("#log-lines .line");
  const timing = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const paint = performance.getEntriesByName("first-contentful-paint")[0];
    return {
      fcp: paint?.startTime ?? null,
      load: nav.loadEventEnd,
      lines: document.querySelectorAll("#log-lines .line").length,
    };
  });
  results.settled = { ...timing, ...(await metrics()), appendSeconds };

  // 3. (on the settled job) the log searched whole (jobs.logs_search) against its baseline, reading every page
  //     of jobs.logs as a client had to before (both through the session, the median of 3 each),
  //     and the raw .txt download.
  const timed = async (url) => {
    const runs = [];
    let bytes = 0;
    for (let i = 0; i < 3; i += 1) {
      const at = performance.now();
      let next = url;
      while (next !== null) {
        const response = await page.request.get(next);
        if (!response.ok()) throw new Error(`${next} answered ${response.status()}`);
        const body = await response.body();
        bytes = body.length;
        const cursor = url.includes("/logs?") ? JSON.parse(body.toString()).next_cursor : null;
        next = cursor === null ? null : `${base}/api/jobs/${settledJob.id}/logs?limit=1000&cursor=${cursor}`;
      }
      runs.push(performance.now() - at);
    }
    return { ms: runs.sort((a, b) => a - b)[1], bytes };
  };
  const pages = await timed(`${base}/api/jobs/${settledJob.id}/logs?limit=1000`);
  const lastHit = await timed(
    `${base}/api/jobs/${settledJob.id}/logs/search?q=${encodeURIComponent(`case_${LINES - 1} `)}`,
  );
  const noHit = await timed(`${base}/api/jobs/${settledJob.id}/logs/search?q=no+such+text`);
  const raw = await timed(`${base}/jobs/${settledJob.id}/log.txt`);
  results.search = { pagesMs: pages.ms, lastHitMs: lastHit.ms, noHitMs: noHit.ms, rawMs: raw.ms, rawBytes: raw.bytes };

  // 2. following
  const liveJob = await acceptJob(storage, { tenant, now: new Date() });
  const liveLease = await claimJob(storage, liveJob.id, new Date(), 3600);
  await page.goto(`${base}/jobs/${liveJob.id}`, { waitUntil: "load" });
  await page.waitForSelector('#log-lines[data-follow="true"]');
  await page.evaluate(() => {
    globalThis.benchLongest = 0;
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries())
        globalThis.benchLongest = Math.max(globalThis.benchLongest, entry.duration);
    }).observe({ type: "longtask" });
  });
  started = performance.now();
  await appendAll(liveLease);
  await finishJob(storage, blobs, liveLease, { now: new Date() });
  await page.waitForSelector(`#L${LINES}`, { timeout: 600_000 });
  const followSeconds = (performance.now() - started) / 1000;
  await page.waitForSelector('#log-lines[data-follow="settled"]');
  const live = await page.evaluate(() => ({
    longestTaskMs: globalThis.benchLongest,
    lines: document.querySelectorAll("#log-lines .line").length,
  }));
  results.following = { followSeconds, ...live, ...(await metrics()) };
} finally {
  await browser.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await app.close();
  await storage.close();
  rmSync(dataDir, { recursive: true, force: true });
}

const s = results.settled;
const f = results.following;
console.log(`dashboard log, ${LINES} lines (${cpus().length} CPUs, load ${loadavg()[0].toFixed(2)})`);
console.log(
  `settled:   first contentful paint ${s.fcp?.toFixed(0)} ms, load ${s.load.toFixed(0)} ms, ${s.lines} lines in the document, JS heap ${s.heapMiB.toFixed(1)} MiB, ${s.nodes} DOM nodes (appending took ${s.appendSeconds.toFixed(1)} s)`,
);
console.log(
  `following: last line on the page ${f.followSeconds.toFixed(1)} s after the first append, longest main-thread task ${f.longestTaskMs.toFixed(0)} ms, ${f.lines} lines kept, JS heap ${f.heapMiB.toFixed(1)} MiB, ${f.nodes} DOM nodes`,
);
const q = results.search;
console.log(
  `search:    the whole log searched in ${q.noHitMs.toFixed(0)} ms (no hit) / ${q.lastHitMs.toFixed(0)} ms (hit on line ${LINES - 1}), ${(q.noHitMs / q.pagesMs).toFixed(2)}× reading every jobs.logs page (${q.pagesMs.toFixed(0)} ms); raw log.txt ${(q.rawBytes / MiB).toFixed(1)} MiB in ${q.rawMs.toFixed(0)} ms`,
);
if (JSON_OUT !== null) writeFileSync(JSON_OUT, JSON.stringify({ lines: LINES, batch: BATCH, ...results }, null, 2));
