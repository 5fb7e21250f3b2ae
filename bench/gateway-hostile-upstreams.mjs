#!/usr/bin/env node
// The dependency gateway against hostile upstreams, seen from the server (issue 33): kiln-server's
// resident memory and another tenant's request latency while jobs of one tenant keep the gateway
// busy with a gzip bomb and a 1.5 GiB download.
//
//   npm run build && node bench/gateway-hostile-upstreams.mjs [--seconds 30] [--rate 20] [--in-flight 2]
//
// One real `kiln-server serve` (SQLite, its embedded host: the sandbox executor and the gateway's
// worker per attempt) with KILN_GATEWAY_ALLOW naming two hostile registries on loopback: one
// answers every download with 2 GiB of zeros gzip-encoded into 2 MB (`content-encoding: gzip`),
// the other streams 1.5 GiB without a content-length. The quiet tenant asks GET /api/identity and
// GET /api/jobs/{id} of a settled job of its own, `--rate` requests a second in turn, first alone
// for `--seconds`, then for `--seconds` while the hostile tenant keeps `--in-flight` jobs of each
// kind in flight (each fails `dependencies` naming the bound; a new one is submitted as one ends).
// Reported: the quiet tenant's p50/p99/max alone and beside, and their ratio; kiln-server's VmRSS
// before, its peak beside (sampled every 50 ms), and the growth; the hostile jobs' outcomes.
// The upstreams run on this process's event loop; the quiet client on a worker thread of its own, so
// the upstreams' writes never delay its noticing an answer (each latency is measured from the
// request's send to its answer's last byte).
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { dist } from "./support/built-packages.mjs";
import { inlineJob } from "./support/inline-job.mjs";
import { option } from "./support/options.mjs";
import { log } from "./support/output.mjs";
import { percentile } from "./support/statistics.mjs";

if (!isMainThread) {
  // The quiet tenant's client: GET /api/identity and GET /api/jobs/{id} in turn at `rate` a second
  // until `until`; each latency from the request's send to its answer's last byte.
  const { base, token, job, until, rate } = workerData;
  const latencies = [];
  let wrong = 0;
  const pending = [];
  const start = Date.now();
  for (let n = 0; Date.now() < until; n++) {
    const path = n % 2 === 0 ? "/api/identity" : `/api/jobs/${job}`;
    const sent = performance.now();
    pending.push(
      fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } }).then(async (res) => {
        await res.arrayBuffer();
        latencies.push(performance.now() - sent);
        if (res.status !== 200) wrong++;
      }),
    );
    await sleep(Math.max(0, start + ((n + 1) * 1000) / rate - Date.now()));
  }
  await Promise.all(pending);
  parentPort.postMessage({ latencies, wrong });
  process.exit(0);
}

const SECONDS = Number(option("seconds", "30"));
const RATE = Number(option("rate", "20"));
const IN_FLIGHT = Number(option("in-flight", "2"));
/** `hostile` (default), or `refused`: the same jobs' churn with registries the policy refuses at once (the control). */
const KIND = option("jobs", "hostile");

const { TERMINAL_JOB_STATUSES } = await import("@kiln/contract");
const { onboardRepository, openStorage } = await import("@kiln/storage");
const { startHostileRegistry } = await import("@kiln/host/testing");
const { personWithToken } = await import(dist("src/testing/harness.js"));
const { ResidentMemorySampler, startServerProcess, stopServerProcess } = await import(dist("test/server-process.js"));
const { crate } = await import(dist("src/testing/e2e-jobs.js"));

const CHECKSUM = "6b".repeat(32);
const REPOSITORY = "acme/widget";
const victim = { name: "victim", version: "1.0.0", checksum: CHECKSUM };

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const ms = (x) => `${x.toFixed(1)} ms`;

const scratch = mkdtempSync(join(tmpdir(), "kiln-bench-hostile-"));
const bomb = await startHostileRegistry({ crate: victim, download: { kind: "gzip-bomb" } });
const huge = await startHostileRegistry({
  crate: victim,
  download: { kind: "huge", bytes: 1.5 * 2 ** 30, announced: false },
});
let server;
try {
  const storage = await openStorage({ dataDir: scratch });
  const quiet = await personWithToken(storage, { role: "owner", now: new Date() });
  const hostile = await personWithToken(storage, { role: "owner", now: new Date() });
  for (const p of [quiet, hostile]) {
    await onboardRepository(storage, { tenantId: p.tenant, name: REPOSITORY, onboardedBy: "bench" }, new Date());
  }
  await storage.close();
  server = await startServerProcess({
    KILN_DATA_DIR: scratch,
    KILN_CRATES_IO_INDEX: "sparse+http://127.0.0.1:9/index/",
    KILN_GATEWAY_ALLOW: `127.0.0.1:${bomb.port},127.0.0.1:${huge.port}`,
  });
  const base = server.url;
  const pid = server.child.pid;
  let keys = 0;
  const call = async (token, method, path, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json", "idempotency-key": `bench-${++keys}` }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text);
  };
  const submit = (token, files) =>
    call(token, "POST", "/api/v4/jobs", inlineJob(REPOSITORY, "kiln2-cpu", crate("probe", files), "build"));
  const settle = async (token, id) => {
    for (;;) {
      const job = await call(token, "GET", `/api/jobs/${id}`);
      if (TERMINAL_JOB_STATUSES.has(job.status)) return job;
      await sleep(100);
    }
  };
  const fromRegistry = (index) => ({
    "Cargo.toml": `[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\nvictim = { version = "1", registry = "evil" }\n`,
    "Cargo.lock": `version = 3\n\n[[package]]\nname = "probe"\nversion = "0.1.0"\ndependencies = ["victim"]\n\n[[package]]\nname = "victim"\nversion = "1.0.0"\nsource = "${index}"\nchecksum = "${CHECKSUM}"\n`,
    ".cargo/config.toml": `[registries.evil]\nindex = "${index}"\n`,
    "src/lib.rs": "",
  });

  // The quiet tenant's own settled job (a build of an empty crate: no dependencies, offline).
  const quietJob = await submit(quiet.token, { "src/lib.rs": "" });
  await settle(quiet.token, quietJob);

  // The quiet client runs on a thread of its own: on this thread the hostile upstreams write
  // gigabytes, and a latency measured here would count the time this loop took to notice the answer.
  const quietLoad = (until) =>
    new Promise((resolve, reject) => {
      const worker = new Worker(new URL(import.meta.url), {
        workerData: { base, token: quiet.token, job: quietJob, until, rate: RATE },
      });
      worker.once("message", resolve);
      worker.once("error", reject);
    });

  const loadBefore = loadavg()[0];
  const alone = await quietLoad(Date.now() + SECONDS * 1000);
  const memory = new ResidentMemorySampler(pid);
  const until = Date.now() + SECONDS * 1000;
  const outcomes = new Map();
  const hostileLoop = async (index) => {
    while (Date.now() < until) {
      const job = await settle(hostile.token, await submit(hostile.token, fromRegistry(index)));
      const key = `${job.status} ${job.failure?.cause}: ${(job.failure?.detail ?? "").replace(/.*(is larger than [^,]+, the bound on one crate|sent a gzip-encoded body).*/, "$1")}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    }
  };
  const [beside] = await Promise.all([
    quietLoad(until),
    ...Array.from({ length: 2 * IN_FLIGHT }, (_, i) =>
      hostileLoop(
        KIND === "refused" ? "sparse+https://127.0.0.1:9/index/" : i % 2 === 0 ? bomb.indexUrl : huge.indexUrl,
      ),
    ),
  ]);
  const { before: rssBefore, peak: rssPeak } = await memory.stop();
  const loadAfter = loadavg()[0];

  const row = (label, run) =>
    `| ${label} | ${run.latencies.length} | ${ms(percentile(run.latencies, 50))} | ${ms(percentile(run.latencies, 99))} | ${ms(Math.max(...run.latencies))} | ${run.wrong} |`;
  const out = [
    `node ${process.version}; ${SECONDS} s alone then ${SECONDS} s beside ${IN_FLIGHT} gzip-bomb and ${IN_FLIGHT} 1.5 GiB jobs in flight; quiet tenant at ${RATE} req/s; 1-minute load ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after`,
    "",
    "| quiet tenant | requests | p50 | p99 | max | not 200 |",
    "| --- | --- | --- | --- | --- | --- |",
    row("alone", alone),
    row("beside the hostile jobs", beside),
    "",
    `p99 beside / alone: ${(percentile(beside.latencies, 99) / percentile(alone.latencies, 99)).toFixed(2)}×`,
    `kiln-server VmRSS: ${mib(rssBefore)} before, ${mib(rssPeak)} at its peak beside (+${mib(rssPeak - rssBefore)})`,
    `hostile jobs: ${[...outcomes].map(([k, n]) => `${n} × ${k}`).join("; ")}`,
  ];
  process.stdout.write(`${out.join("\n")}\n`);
  log("gateway-hostile-upstreams: done");
} finally {
  await stopServerProcess(server);
  await bomb.close();
  await huge.close();
  rmSync(scratch, { recursive: true, force: true });
}
