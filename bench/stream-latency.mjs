#!/usr/bin/env node
// Stream latency across kiln-server processes: the delay from a log line appended through server
// B (a host's POST /host/v1/logs) to its delivery on a jobs.logs_stream open on another server,
// over real HTTP, with every server a real `kiln-server serve` process on one PostgreSQL.
//
//   npm run build && node bench/stream-latency.mjs [--lines 200] [--json FILE]
//
// Three processes share one throwaway PostgreSQL cluster (scripts/postgres-cluster.mjs): B takes
// the appends; A-notify (KILN_NOTIFICATIONS=on, the default) and A-poll (KILN_NOTIFICATIONS=off:
// the 200 ms log poll streams had before notifications) each serve one stream of the same job,
// so both are measured on the same appends, under the same load, in the same run. No server
// runs a local host (KILN_LOCAL_HOST=off); the bench is the host, enrolled on B. Each line's delay
// is measured in this process, from just before its append request to B until its frame is read
// from each stream; the next line is appended once both streams delivered it, after a random
// pause of 0–50 ms, so lines fall at every phase of the poll. The append's own round trip to B
// is measured alongside as the baseline (a delivery cannot beat the commit it announces by
// much). The goal: < 100 ms.
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { startThrowawayCluster } from "../scripts/postgres-cluster.mjs";
import { dist, requireBuilt } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";
import { log } from "./support/output.mjs";
import { removeScratch, temp } from "./support/scratch.mjs";
import { startServeProcess } from "./support/server-process.mjs";
import { percentile } from "./support/statistics.mjs";

requireBuilt(dist("src/main.js"), dist("src/testing/job-fixtures.js"));
const { openStorage } = await import("@kiln/storage");
const { fetchCaCertificate, HostTlsIdentity, httpHostProtocol, newKeyAndSigningRequest, requestEnrollment } =
  await import("@kiln/host");
const { mintHostEnrollmentToken } = await import(dist("src/domain/hosts/host-identities.js"));
const { acceptJob } = await import(dist("src/testing/job-fixtures.js"));
const { personWithToken } = await import(dist("src/testing/harness.js"));

const LINES = Number(option("lines", "200"));
const JSON_OUT = option("json", null);
const GOAL_MS = 100;

/** One `kiln-server serve` on the shared database; resolves once it answers. */
const startServer = (name, databaseUrl, masterKey, env) =>
  startServeProcess(name, {
    dataDir: temp(`kiln-bench-${name}-`),
    env: { KILN_DATABASE_URL: databaseUrl, KILN_MASTER_KEY: masterKey, ...env },
  });

/** A jobs.logs_stream read frame by frame; `waitFor(text)` resolves when a record with that text arrives. */
async function openLogStream(origin, jobId, token) {
  const controller = new AbortController();
  const res = await fetch(`${origin}/api/jobs/${jobId}/logs/stream`, {
    headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
    signal: controller.signal,
  });
  if (res.status !== 200) throw new Error(`stream on ${origin}: ${res.status} ${await res.text()}`);
  const waiting = new Map();
  const seen = new Map();
  let firstFrame;
  const first = new Promise((resolve) => {
    firstFrame = resolve;
  });
  (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block
            .split("\n")
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).trim())
            .join("\n");
          if (data === "") continue;
          const at = process.hrtime.bigint();
          firstFrame();
          for (const record of JSON.parse(data).page.records) {
            seen.set(record.text, at);
            waiting.get(record.text)?.(at);
          }
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    }
  })();
  await first;
  return {
    waitFor: (text) => (seen.has(text) ? Promise.resolve(seen.get(text)) : new Promise((r) => waiting.set(text, r))),
    close: () => controller.abort(),
  };
}

const fmt = (x) => x.toFixed(1);

// ---------------------------------------------------------------------------------------------

log(`bench: ${cpus().length} CPUs, load ${loadavg()[0].toFixed(2)} before the run; ${LINES} lines`);
const cluster = await startThrowawayCluster();
const servers = [];
let results;
try {
  const databaseUrl = new URL(cluster.url);
  databaseUrl.pathname = "/kiln_stream_bench";
  {
    const admin = await import("pg");
    const client = new admin.default.Client({ connectionString: cluster.url });
    await client.connect();
    await client.query("create database kiln_stream_bench");
    await client.end();
  }
  const masterKey = randomBytes(32).toString("hex");
  // B first: it applies the migrations; the others find them applied.
  const b = await startServer("b", databaseUrl.toString(), masterKey, {});
  servers.push(b);
  const notify = await startServer("a-notify", databaseUrl.toString(), masterKey, { KILN_NOTIFICATIONS: "on" });
  servers.push(notify);
  const poll = await startServer("a-poll", databaseUrl.toString(), masterKey, { KILN_NOTIFICATIONS: "off" });
  servers.push(poll);

  // The tenant, a token, one queued job, and this process enrolled on B as the host running it.
  const storage = await openStorage({ databaseUrl: databaseUrl.toString(), dataDir: "/nonexistent" });
  const owner = await personWithToken(storage, { role: "viewer", now: new Date() });
  const job = await acceptJob(storage, { tenant: owner.tenant, now: new Date() });
  const { token } = await mintHostEnrollmentToken(storage, {
    hostId: "bench-host",
    createdBy: "bench",
    now: new Date(),
  });
  await storage.close();
  // Enrolled as kiln-host enrolls: the one-time token, B's CA, a key of its own, a certificate.
  const ca = await fetchCaCertificate(b.hostEndpoint);
  const { keyPem, csrPem } = await newKeyAndSigningRequest();
  const issued = await requestEnrollment(b.hostEndpoint, { token, csrPem, caCertificatePem: ca.caCertificate });
  const identity = HostTlsIdentity.inMemory({
    keyPem,
    certificatePem: issued.certificate,
    caCertificatePem: issued.caCertificate,
  });
  const host = httpHostProtocol({ endpoint: b.hostEndpoint, identity });
  await host.enroll({ id: "bench-host", vcpus: 16, memoryBytes: 2 ** 34, isolation: "sandbox" });
  const placement = await host.claim("bench-host", 16);
  if (placement?.jobId !== job.id)
    throw new Error(`the bench host was not placed the job: ${JSON.stringify(placement)}`);
  const ref = { jobId: placement.jobId, attempt: placement.attempt, leaseToken: placement.leaseToken };

  const streams = {
    notify: await openLogStream(notify.origin, job.id, owner.token),
    poll: await openLogStream(poll.origin, job.id, owner.token),
  };
  const delays = { notify: [], poll: [], append: [] };
  for (let i = 0; i < LINES; i++) {
    if (i % 20 === 0) await host.heartbeat(ref);
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 50));
    const text = `line ${i} ${randomBytes(4).toString("hex")}`;
    const sent = process.hrtime.bigint();
    const answer = await host.appendLogs(ref, [{ stream: "stdout", at: new Date().toISOString(), text }]);
    delays.append.push(Number(process.hrtime.bigint() - sent) / 1e6);
    if (answer !== "accepted") throw new Error(`append ${i}: ${answer}`);
    const [atNotify, atPoll] = await Promise.all([streams.notify.waitFor(text), streams.poll.waitFor(text)]);
    delays.notify.push(Number(atNotify - sent) / 1e6);
    delays.poll.push(Number(atPoll - sent) / 1e6);
  }
  streams.notify.close();
  streams.poll.close();
  results = Object.fromEntries(
    Object.entries(delays).map(([mode, xs]) => [
      mode,
      { p50: percentile(xs, 50), p99: percentile(xs, 99), max: Math.max(...xs), lines: xs.length },
    ]),
  );
} finally {
  for (const server of servers.reverse()) await server.stop();
  await cluster.stop();
  removeScratch();
}

const out = [
  `append through server B → frame on a jobs.logs_stream of another kiln-server process, ${LINES} lines (ms)`,
  "",
  "| stream served by | p50 | p99 | max | p50 × notify | goal (< 100 ms p99) |",
  "| --- | ---: | ---: | ---: | ---: | --- |",
  ...[
    ["(baseline: B answering the append itself)", results.append],
    ["A-notify (LISTEN/NOTIFY)", results.notify],
    ["A-poll (KILN_NOTIFICATIONS=off, 200 ms poll)", results.poll],
  ].map(
    ([name, r]) =>
      `| ${name} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${fmt(r.max)} | ${(r.p50 / results.notify.p50).toFixed(1)}× | ${r.p99 < GOAL_MS ? "pass" : "miss"} |`,
  ),
  "",
  `load average after the run: ${loadavg()[0].toFixed(2)}`,
];
process.stdout.write(`${out.join("\n")}\n`);
if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify(results, null, 2));
