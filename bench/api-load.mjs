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
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { dist } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";
import { insertCopies, settleOneJob } from "./support/settled-job-copies.mjs";

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

const { openStorage } = await import("@kiln/storage");
const { createPostgresTestDatabase } = await import("@kiln/storage/testing");
const { startServerProcess, stopServerProcess } = await import(dist("test/server-process.js"));

const START = new Date("2026-10-01T00:00:00.000Z");

/** One real settled job, and a function that copies its rows until the tenant holds `n` jobs. */
async function seedTenant(storage, dataDir) {
  const settled = await settleOneJob(storage, dataDir, { start: START, repository: "bench/load" });
  const ids = [settled.job.id];
  const growTo = async (n) => {
    const copies = { from: ids.length, to: n, batch: 400, start: START, withTransitions: true };
    for (const id of await insertCopies(storage, settled, copies)) ids.push(id);
  };
  return { token: settled.person.token, ids, growTo };
}

function load(url, token, paths, { rate, duration }) {
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections: CONNECTIONS,
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
  try {
    for (const n of COUNTS) {
      const seeding = Date.now();
      await tenant.growTo(n);
      const seeded = (Date.now() - seeding) / 1000;
      const server = await startServerProcess({
        KILN_DATA_DIR: dataDir,
        KILN_DATABASE_URL: databaseUrl,
        KILN_LOCAL_HOST: "off",
      });
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
            ]
              .filter(([key]) => OPERATIONS.includes(key))
              .map(([, ...line]) => line)) {
          const r = await load(server.url, tenant.token, paths, { rate, duration: DURATION });
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
            `${engine} ${n.toLocaleString("en-US")} jobs (seeded in ${seeded.toFixed(0)} s) ${operation}: ` +
              `${row.achieved.toFixed(0)} req/s${rate === null ? "" : ` of ${rate}`}, p50 ${row.p50} ms, p99 ${row.p99} ms, ` +
              `${row.non2xx} non-2xx, ${row.errors} errors, server RSS ${row.rssMiB.toFixed(0)} MiB`,
          );
        }
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
if (JSON_OUT !== null) writeFileSync(JSON_OUT, JSON.stringify({ results, soakSamples }, null, 2));
