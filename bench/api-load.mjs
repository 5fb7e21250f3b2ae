#!/usr/bin/env node
// jobs.get and jobs.list under a steady 1,000 requests per second, on SQLite and PostgreSQL, as
// the tenant's jobs grow; and a server process's memory over a long run of that load (issue 22).
//
//   npm run build && node bench/api-load.mjs [--jobs 1000,10000,100000] [--rate 1000]
//     [--duration 30] [--connections 50] [--soak 3600] [--soak-sample 60] [--engines sqlite,postgres]
//     [--soak-only] [--operations jobs.get,jobs.list,jobs.get-unthrottled] [--json FILE]
//
// PostgreSQL is the database KILN_TEST_POSTGRES_URL's cluster holds (a database of its own is
// made and dropped); without it only SQLite runs. For each engine: a fresh database, one tenant,
// one job settled through the real verbs (accepted, placed, finished with a log and transitions),
// then copies of its rows (jobs, attempts, transitions; each a distinct job one second apart)
// until the tenant holds the first `--jobs` count. A real `kiln-server serve` process (no local
// host) serves it; autocannon (--connections connections, `overallRate` --rate requests/s in
// all) sends for --duration seconds:
//
//   jobs.get   GET /api/jobs/<id> of a job drawn at random from the tenant's;
//   jobs.list  GET /api/jobs?limit=20 (a dashboard page; the default 200 would measure JSON size);
//   jobs.get unthrottled, for the throughput ceiling (the issue's 2,939 req/s at 50 connections);
//   jobs.list-filtered  GET /api/jobs?limit=20&status=queued, a filter no job of the tenant's
//                       matches (every seeded job passed): only with --operations naming it.
//
// With --big-manifest N (issue 33; N source entries, 250000 the archive limit), a second tenant
// is seeded alike and then given one queued job whose source manifest has N entries (about
// 46 MB of JSON at 250,000, entries shaped as a streamed archive's), newer than every other, so
// that its first page holds it. With it, --operations may also name:
//
//   jobs.list-unthrottled      the first tenant's page (no large manifest), unthrottled;
//   jobs.list-big              the second tenant's page (holding the large manifest) at --rate;
//   jobs.list-big-unthrottled  the same, unthrottled;
//   identity-beside-big-flood  the first tenant's GET /api/identity every 50 ms (from this
//                              process), alone for --duration, then beside a flood of the second
//                              tenant's page (--connections, unthrottled, from a child process at
//                              nice --flood-nice, 19 by default) for --duration: the quiet
//                              tenant's p50, p99 and worst.
//
// then seeds up to the next count on the same database and measures again. Latency is
// autocannon's (from the request's first byte written to the answer's last read), p50 and p99.
//
// The soak (--soak seconds, on SQLite, at the largest count): jobs.get, with a jobs.list in every
// 50 requests, at --rate in all, the server's resident set size (VmRSS of /proc/<pid>/status) sampled every
// --soak-sample seconds. No growth means the samples of the second half stay within the first
// half's range (garbage collection makes RSS saw-tooth, so one sample proves nothing).
//
// Nothing here is asserted: it prints figures (docs/benchmarks.md records them). Run it on a
// quiet machine; on a loaded one the rate is what the machine gave, which the output says.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { dist } from "./support/built-packages.mjs";
import { floodFromChild } from "./support/flood-client.mjs";
import { option } from "./support/options.mjs";
import { insertCopies, settleOneJob } from "./support/settled-job-copies.mjs";

/** The nice value of the flood's client process (--flood-nice; 0 runs it as the server). */
const FLOOD_NICE = Number(option("flood-nice", "19"));
/**
 * The server's nice value (--server-nice, default 0): below 0 (as root) its threads run before
 * the machine's other work, a stand-in for a server on a machine of its own when the bench
 * shares one (a body worker still runs ten levels below the loop).
 */
const SERVER_NICE = Number(option("server-nice", "0"));

/** Sets the nice value of every thread of process `pid` (Linux keeps one per thread). */
function reniceThreads(pid, nice) {
  for (const thread of readdirSync(`/proc/${pid}/task`)) execFileSync("renice", ["-n", String(nice), "-p", thread]);
}

const COUNTS = option("jobs", "1000,10000,100000").split(",").map(Number);
const RATE = Number(option("rate", "1000"));
const DURATION = Number(option("duration", "30"));
const CONNECTIONS = Number(option("connections", "50"));
const SOAK = Number(option("soak", "3600"));
const SOAK_SAMPLE = Number(option("soak-sample", "60"));
const ENGINES = option("engines", "sqlite,postgres").split(",");
/** Skip the latency measurements (the soak only). */
const SOAK_ONLY = process.argv.includes("--soak-only");
const JSON_OUT = option("json", null);
const OPERATIONS = option("operations", "jobs.get,jobs.list,jobs.get-unthrottled").split(",");
const BIG_MANIFEST = Number(option("big-manifest", "0"));

const { openStorage } = await import("@kiln/storage");
const { createPostgresTestDatabase } = await import("@kiln/storage/testing");
const { startServerProcess, stopServerProcess } = await import(dist("test/server-process.js"));
const { acceptJob } = await import(dist("src/testing/job-fixtures.js"));

const START = new Date("2026-10-01T00:00:00.000Z");

/** One real settled job, and a function that copies its rows until the tenant holds `n` jobs. */
async function seedTenant(storage, dataDir, repository = "bench/load") {
  const settled = await settleOneJob(storage, dataDir, { start: START, repository });
  const ids = [settled.job.id];
  const growTo = async (n) => {
    const copies = { from: ids.length, to: n, batch: 400, start: START, withTransitions: true };
    for (const id of await insertCopies(storage, settled, copies)) ids.push(id);
  };
  return { token: settled.person.token, tenant: settled.person.tenant, ids, growTo };
}

/** A streamed archive's source manifest of `n` files, each one slice of a part (host-protocol SourceEntry). */
function archiveManifest(n) {
  const hex = (i, salt) => createHash("sha256").update(`${salt}${i}`).digest("hex");
  return Array.from({ length: n }, (_, i) => ({
    path: `crates/c${Math.floor(i / 1000)}/src/m${i % 1000}.rs`,
    sha256: hex(i, "file"),
    bytes: 100 + (i % 900),
    executable: false,
    segments: [{ part: hex(Math.floor(i / 2000), "part"), offset: (i % 2000) * 1000, length: 100 + (i % 900) }],
  }));
}

function load(url, token, paths, { rate, duration, connections = CONNECTIONS }) {
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections,
        duration,
        ...(rate === null ? {} : { overallRate: rate }),
        headers: { authorization: `Bearer ${token}` },
        requests: [{ method: "GET", setupRequest: (req) => ({ ...req, path: paths() }) }],
      },
      (error, result) => (error ? reject(error) : resolve(result)),
    );
    autocannon.track(instance, { renderProgressBar: false, renderResultsTable: false, renderLatencyTable: false });
  });
}

const rssMiB = (pid) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
};

const results = [];
const soakSamples = [];
const quietResults = [];

/** A result line of `load`, printed and kept for the table. */
function report(engine, n, operation, rate, r, server) {
  const row = {
    engine,
    jobs: n,
    operation,
    target: rate,
    achieved: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    rssMiB: rssMiB(server.child.pid),
  };
  results.push(row);
  console.log(
    `${engine} ${n.toLocaleString("en-US")} jobs ${operation}: ` +
      `${row.achieved.toFixed(0)} req/s${rate === null ? "" : ` of ${rate}`}, p50 ${row.p50} ms, p99 ${row.p99} ms, ` +
      `${row.non2xx} non-2xx, ${row.errors} errors, server RSS ${row.rssMiB.toFixed(0)} MiB`,
  );
}

/**
 * Waits until the server answers a GET /api/identity within 50 ms (at most 60 s): after an
 * unthrottled run the server may still be answering requests the client gave up on.
 */
async function settle(url, token) {
  for (let tries = 0; tries < 600; tries++) {
    const began = performance.now();
    await (await fetch(`${url}/api/identity`, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer();
    if (performance.now() - began < 50) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The --big-manifest operations (see the top of this file). */
async function measureBigManifest(engine, n, server, tenant, big) {
  const page = () => "/api/jobs?limit=20";
  for (const [operation, rate] of [
    ["jobs.list-big", RATE],
    ["jobs.list-big-unthrottled", null],
  ]) {
    if (!OPERATIONS.includes(operation)) continue;
    await settle(server.url, tenant.token);
    const r = await load(server.url, big.token, page, { rate, duration: DURATION });
    const what = `jobs.list, a ${BIG_MANIFEST.toLocaleString("en-US")}-entry job in the page`;
    report(engine, n, rate === null ? `${what} (unthrottled)` : what, rate, r, server);
  }
  if (!OPERATIONS.includes("identity-beside-big-flood")) return;
  // What an earlier unthrottled run left queued in the server is answered first.
  await settle(server.url, tenant.token);
  const alone = await quietSamples(server.url, tenant.token, DURATION);
  // The flood's client at nice FLOOD_NICE (a stand-in for a client on a machine of its own, as
  // reliability trial T15's noisy client), started before the quiet tenant's requests, and for
  // a second longer, so that every one of them is beside it.
  const flooding = await floodFromChild({
    url: server.url,
    token: big.token,
    path: "/api/jobs?limit=20",
    seconds: DURATION + 2,
    connections: CONNECTIONS,
    nice: FLOOD_NICE,
  });
  const floodDone = flooding.go();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const beside = await quietSamples(server.url, tenant.token, DURATION);
  const flood = await floodDone;
  // What the quiet tenant waited behind, whatever the machine's speed: the flood's answers read
  // while each of its requests was out (counted from the flood's client, by the shared clock).
  const answered = flood.answered;
  const answeredBefore = (at) => {
    let low = 0;
    let high = answered.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (answered[mid] < at) low = mid + 1;
      else high = mid;
    }
    return low;
  };
  const behind = beside.intervals
    .map(([sent, done]) => answeredBefore(done) - answeredBefore(sent))
    .sort((a, b) => a - b);
  const behindAt = (q) => behind[Math.min(behind.length - 1, Math.floor(q * behind.length))] ?? Number.NaN;
  const line = {
    engine,
    jobs: n,
    alone: { ...alone, intervals: undefined },
    beside: { ...beside, intervals: undefined },
    flood: { ...flood, answered: answered.length },
    floodAnswersDuringQuiet: { p50: behindAt(0.5), p99: behindAt(0.99), max: behind.at(-1) ?? Number.NaN },
  };
  quietResults.push(line);
  const figures = (q) => `p50 ${q.p50.toFixed(1)} ms, p99 ${q.p99.toFixed(1)} ms, worst ${q.max.toFixed(0)} ms`;
  console.log(
    `${engine} ${n.toLocaleString("en-US")} jobs: quiet tenant's GET /api/identity every 50 ms: alone ${figures(alone)}; ` +
      `beside the flood ${figures(beside)} (${alone.failed + beside.failed} not 200), ` +
      `the flood's answers during one: p50 ${behindAt(0.5)}, p99 ${behindAt(0.99)}, most ${behind.at(-1)}; ` +
      `the flood (a client at nice ${FLOOD_NICE}): ${CONNECTIONS} connections of jobs.list with the ${BIG_MANIFEST.toLocaleString("en-US")}-entry job, ` +
      `${flood.achieved.toFixed(0)} req/s, p50 ${flood.p50} ms, p99 ${flood.p99} ms, ${flood.non2xx} non-2xx`,
  );
}

/**
 * A quiet tenant: GET /api/identity every 50 ms for `seconds` (open loop: each sent when due,
 * whether the one before was answered), timed from send to the answer's last byte. From this
 * process, whose loop does nothing else meanwhile (the flood is another process's).
 */
async function quietSamples(url, token, seconds) {
  const latencies = [];
  /** Each request's [sent, answered], ms since the epoch. */
  const intervals = [];
  let failed = 0;
  const pending = [];
  const start = performance.now();
  for (let n = 0; performance.now() - start < seconds * 1000; n++) {
    pending.push(
      (async () => {
        const began = performance.now();
        const res = await fetch(`${url}/api/identity`, { headers: { authorization: `Bearer ${token}` } });
        await res.arrayBuffer();
        if (res.status !== 200) failed += 1;
        latencies.push(performance.now() - began);
        intervals.push([performance.timeOrigin + began, performance.timeOrigin + performance.now()]);
      })(),
    );
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + (n + 1) * 50 - performance.now())));
  }
  await Promise.all(pending);
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN;
  return {
    count: latencies.length,
    p50: at(0.5),
    p99: at(0.99),
    max: latencies.at(-1) ?? Number.NaN,
    failed,
    intervals,
  };
}

for (const engine of ENGINES) {
  let databaseUrl;
  let dropDatabase = async () => {};
  if (engine === "postgres") {
    if (!process.env.KILN_TEST_POSTGRES_URL) {
      console.log("postgres: skipped (KILN_TEST_POSTGRES_URL is not set)");
      continue;
    }
    const made = await createPostgresTestDatabase();
    databaseUrl = made.url;
    dropDatabase = made.drop;
  }
  const dataDir = mkdtempSync(join(tmpdir(), "kiln-bench-load-"));
  const storage = await openStorage({ dataDir, databaseUrl });
  const tenant = await seedTenant(storage, dataDir);
  // The second tenant, whose newest job holds a manifest of BIG_MANIFEST entries (see above).
  const big = BIG_MANIFEST > 0 ? await seedTenant(storage, dataDir, "bench/big") : null;
  if (big !== null) {
    const source = archiveManifest(BIG_MANIFEST);
    const bytes = JSON.stringify(source).length;
    const inserting = Date.now();
    // Accepted after every copy any count makes (one a second from START), so always on the first page.
    await acceptJob(storage, {
      tenant: big.tenant,
      now: new Date(START.getTime() + 1e10),
      repository: "bench/big",
      source,
    });
    console.log(
      `${engine}: a job of ${BIG_MANIFEST.toLocaleString("en-US")} source entries (${(bytes / 1e6).toFixed(1)} MB of manifest) inserted in ${((Date.now() - inserting) / 1000).toFixed(1)} s`,
    );
  }
  try {
    for (const n of COUNTS) {
      const seeding = Date.now();
      await tenant.growTo(n);
      await big?.growTo(n);
      const seeded = (Date.now() - seeding) / 1000;
      const server = await startServerProcess({
        KILN_DATA_DIR: dataDir,
        KILN_DATABASE_URL: databaseUrl,
        KILN_LOCAL_HOST: "off",
      });
      if (SERVER_NICE !== 0) reniceThreads(server.child.pid, SERVER_NICE);
      try {
        const pick = () => tenant.ids[Math.floor(Math.random() * tenant.ids.length)];
        // A warm-up, so the first figures are not the process's first requests.
        await load(server.url, tenant.token, () => `/api/jobs/${pick()}`, { rate: RATE, duration: 3 });
        for (const [operation, paths, rate] of SOAK_ONLY
          ? []
          : [
              ["jobs.get", "jobs.get", () => `/api/jobs/${pick()}`, RATE],
              ["jobs.list", "jobs.list", () => "/api/jobs?limit=20", RATE],
              ["jobs.list-filtered", "jobs.list status=queued", () => "/api/jobs?limit=20&status=queued", RATE],
              ["jobs.get-unthrottled", "jobs.get (unthrottled)", () => `/api/jobs/${pick()}`, null],
              ["jobs.list-unthrottled", "jobs.list (unthrottled)", () => "/api/jobs?limit=20", null],
            ]
              .filter(([key]) => OPERATIONS.includes(key))
              .map(([, ...line]) => line)) {
          const r = await load(server.url, tenant.token, paths, { rate, duration: DURATION });
          report(engine, n, `${operation} (seeded in ${seeded.toFixed(0)} s)`, rate, r, server);
        }
        if (big !== null && !SOAK_ONLY) await measureBigManifest(engine, n, server, tenant, big);
        if (engine === "sqlite" && n === COUNTS.at(-1) && SOAK > 0) {
          const pid = server.child.pid;
          let turn = 0;
          // Mostly jobs.get, a jobs.list in every 50: at 100,000 jobs a list costs what about 50
          // gets do, so an even mix would measure the list's ceiling rather than a long run at the rate.
          const paths = () => (++turn % 50 === 0 ? "/api/jobs?limit=20" : `/api/jobs/${pick()}`);
          const started = Date.now();
          soakSamples.push({ seconds: 0, rssMiB: rssMiB(pid) });
          const sampler = setInterval(() => {
            soakSamples.push({ seconds: Math.round((Date.now() - started) / 1000), rssMiB: rssMiB(pid) });
          }, SOAK_SAMPLE * 1000);
          const r = await load(server.url, tenant.token, paths, { rate: RATE, duration: SOAK });
          clearInterval(sampler);
          soakSamples.push({ seconds: Math.round((Date.now() - started) / 1000), rssMiB: rssMiB(pid) });
          const half = Math.floor(soakSamples.length / 2);
          const first = soakSamples.slice(1, half).map((s) => s.rssMiB);
          const second = soakSamples.slice(half).map((s) => s.rssMiB);
          console.log(
            `soak: sqlite ${n.toLocaleString("en-US")} jobs, ${SOAK} s at ${r.requests.average.toFixed(0)} req/s ` +
              `(jobs.get, one jobs.list in 50), p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, ` +
              `${r.non2xx} non-2xx; RSS MiB every ${SOAK_SAMPLE} s: ${soakSamples.map((s) => s.rssMiB.toFixed(0)).join(" ")}; ` +
              `first half ${Math.min(...first).toFixed(0)}–${Math.max(...first).toFixed(0)}, ` +
              `second half ${Math.min(...second).toFixed(0)}–${Math.max(...second).toFixed(0)}`,
          );
        }
      } finally {
        await stopServerProcess(server);
      }
    }
  } finally {
    await storage.close();
    await dropDatabase();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

console.log("");
console.log("| engine | jobs in tenant | operation | req/s (target) | p50 ms | p99 ms | non-2xx | server RSS MiB |");
console.log("|---|---:|---|---:|---:|---:|---:|---:|");
for (const r of results) {
  console.log(
    `| ${r.engine} | ${r.jobs.toLocaleString("en-US")} | ${r.operation} | ${r.achieved.toFixed(0)} (${r.target ?? "max"}) | ` +
      `${r.p50} | ${r.p99} | ${r.non2xx} | ${r.rssMiB.toFixed(0)} |`,
  );
}
console.log(`load average at the end: ${execFileSync("cat", ["/proc/loadavg"], { encoding: "utf8" }).trim()}`);
if (JSON_OUT !== null) writeFileSync(JSON_OUT, JSON.stringify({ results, quietResults, soakSamples }, null, 2));
