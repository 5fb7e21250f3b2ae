#!/usr/bin/env node
// Operating states under load: GET /operator/api/platform/states answered while 20 jobs run
// (issue 18: ≤ 50 ms at the 99th percentile).
//
//   npm run build && [KILN_DATABASE_URL=postgres://…] node bench/operating-states.mjs [--jobs 20] [--reads 1000] [--json FILE]
//
// kiln runs in this process wired like `kiln-server serve` (openStorage on a fresh data dir, a
// LocalBlobStore beside it, buildApp, the embedded local host with the sandbox executor, offering
// enough vCPUs for every job at once). It submits `--jobs` real cargo jobs whose one test sleeps
// (each attempt holds its sandbox, heartbeats and ships logs for minutes, so the host and the
// database stay busy with live work), waits until all run, runs one canary pass so workload
// health has a canary to judge, then reads the operating states `--reads` times one after the
// other as a signed-in operator through Fastify's inject (no TCP socket measured) and prints the
// latency percentiles. Must run as root (the sandbox executor requires it).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { dist } from "./support/built-packages.mjs";
import { startInProcessKiln } from "./support/in-process-kiln.mjs";
import { inlineJob } from "./support/inline-job.mjs";
import { option } from "./support/options.mjs";
import { percentile } from "./support/statistics.mjs";

const { silentLogger, systemClock } = await import("@kiln/contract");
const { masterKey, operatorCredential } = await import(dist("src/web/auth/operator-credential.js"));
const { CanaryRunner } = await import(dist("src/domain/platform/canaries/canary-runner.js"));
const { canarySettings } = await import(dist("src/domain/platform/canaries/canary-settings.js"));

const JOBS = Number(option("jobs", "20"));
const READS = Number(option("reads", "1000"));
const JSON_OUT = option("json", null);
const SLEEP_SECONDS = 600;
const GOAL_P99_MS = 50;

const dataDir = mkdtempSync(join(tmpdir(), "kiln-bench-states-"));
const settings = canarySettings();
// KILN_DATABASE_URL (postgres://…) measures the scale-out engine; the embedded SQLite otherwise.
// The job notifications stay buildApp's own; the host offers enough vCPUs for every job at once.
const kiln = await startInProcessKiln({
  dataDir,
  cgroupParentName: `kiln-bench-${process.pid}`,
  databaseUrl: process.env.KILN_DATABASE_URL,
  notifications: false,
  appOptions: { canaries: settings },
  hostOptions: { vcpus: 2 * (JOBS + 1) },
});
const { storage, app, auth } = kiln;
await kiln.onboard("bench/sleeper");
const file = (path, text) => ({ path, bytes: [...Buffer.from(text)], executable: false });
const sleeper = [
  file("Cargo.toml", '[package]\nname = "sleeper"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'),
  file(
    "src/lib.rs",
    `#[cfg(test)]\nmod tests {\n    #[test]\n    fn sleeps() {\n        std::thread::sleep(std::time::Duration::from_secs(${SLEEP_SECONDS}));\n    }\n}\n`,
  ),
];
const jobIds = [];
for (let i = 0; i < JOBS; i++) {
  const res = await app.inject({
    method: "POST",
    url: "/api/v4/jobs",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": `sleeper-${i}` },
    payload: JSON.stringify(inlineJob("bench/sleeper", "kiln2-cpu", sleeper)),
  });
  if (res.statusCode !== 200) throw new Error(`submit ${i}: ${res.statusCode} ${res.body}`);
  jobIds.push(res.json());
}

// Wait until every job's test is running (its attempt holds a sandbox), at most 10 minutes.
const started = Date.now();
for (;;) {
  const attempts = await storage.db
    .selectFrom("jobs")
    .select((eb) => eb.fn.countAll().as("n"))
    .where("id", "in", jobIds)
    .where("status", "=", "running")
    .executeTakeFirst();
  const compiled = await storage.db
    .selectFrom("log_records")
    .select((eb) => eb.fn.count("job_id").distinct().as("n"))
    .where("job_id", "in", jobIds)
    .where("text", "like", "%Running unittests%")
    .executeTakeFirst();
  if (Number(attempts?.n) === JOBS && Number(compiled?.n) === JOBS) break;
  if (Date.now() - started > 600_000) {
    throw new Error(`after 10 minutes ${attempts?.n} of ${JOBS} jobs running, ${compiled?.n} of them in their test`);
  }
  await new Promise((r) => setTimeout(r, 500));
}
const warmupSeconds = (Date.now() - started) / 1000;

// One canary pass: a 21st job, pinned to the embedded host.
const canary = await new CanaryRunner({ storage, clock: systemClock, log: silentLogger, settings, app }).runOnce();

const credential = await operatorCredential(storage, masterKey(dataDir), false, new Date());
const opened = await app.inject({
  method: "POST",
  url: "/operator/auth/session",
  headers: { authorization: `Bearer ${credential}` },
});
const cookie = opened.cookies.find((c) => c.name === "kiln_operator_session");
if (cookie === undefined) throw new Error(`no operator session: ${opened.statusCode} ${opened.body}`);
const session = { cookie: `kiln_operator_session=${cookie.value}`, "sec-fetch-site": "same-origin" };

const samples = [];
let last;
for (let i = 0; i < READS; i++) {
  const t0 = performance.now();
  const res = await app.inject({ method: "GET", url: "/operator/api/platform/states", headers: session });
  samples.push(performance.now() - t0);
  if (res.statusCode !== 200) throw new Error(`states: ${res.statusCode} ${res.body}`);
  last = res.json();
}
const runningAtEnd = await storage.db
  .selectFrom("jobs")
  .select((eb) => eb.fn.countAll().as("n"))
  .where("id", "in", jobIds)
  .where("status", "=", "running")
  .executeTakeFirst();

const sorted = [...samples].sort((a, b) => a - b);
const pct = (p) => percentile(samples, p);
const figures = {
  jobs_running: Number(runningAtEnd?.n),
  reads: READS,
  p50_ms: pct(50),
  p95_ms: pct(95),
  p99_ms: pct(99),
  max_ms: sorted.at(-1),
  goal_p99_ms: GOAL_P99_MS,
  warmup_seconds: warmupSeconds,
  cpus: cpus().length,
  loadavg_1m: loadavg()[0],
  canary_submitted: canary.submitted.map((s) => s.jobId),
  states: {
    liveness: last.management_liveness.reason.code,
    readiness: last.management_readiness.reason.code,
    capacity: `${last.execution_capacity.reason.code} (${last.execution_capacity.vcpus_free} vCPUs free)`,
    workload: last.end_to_end_workload_health.reason.code,
  },
};
const ms = (x) => `${x.toFixed(2)} ms`;
process.stdout.write(
  [
    `operating states (${storage.dialect}) while ${figures.jobs_running} jobs run (${READS} reads, ${figures.cpus} CPUs, load ${figures.loadavg_1m.toFixed(1)}):`,
    `  p50 ${ms(figures.p50_ms)}  p95 ${ms(figures.p95_ms)}  p99 ${ms(figures.p99_ms)}  max ${ms(figures.max_ms)}  (goal p99 ≤ ${GOAL_P99_MS} ms: ${figures.p99_ms <= GOAL_P99_MS ? "met" : "NOT met"})`,
    `  states: ${JSON.stringify(figures.states)}`,
    "",
  ].join("\n"),
);
if (JSON_OUT !== null) writeFileSync(JSON_OUT, `${JSON.stringify({ figures, samples }, null, 2)}\n`);

for (const id of jobIds) {
  await app.inject({
    method: "POST",
    url: `/api/jobs/${id}/cancel`,
    headers: { ...auth, "idempotency-key": `cancel-${id}` },
  });
}
await kiln.stop();
rmSync(dataDir, { recursive: true, force: true });
if (figures.jobs_running !== JOBS) {
  process.stderr.write(`bench: only ${figures.jobs_running} of ${JOBS} jobs were running at the end\n`);
  process.exit(1);
}
