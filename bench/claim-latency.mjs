#!/usr/bin/env node
// Submission-to-claim latency of a remote kiln-host: the delay from a jobs.submit request to the
// moment a host on another "machine" (here: this process, reaching the control plane only over
// its host listener, HTTPS with mutual TLS) holds the placement — with the long-poll claim (the
// host keeps one claim waiting; the control plane answers it when the submission's notice
// arrives) against the 500 ms poll every kiln-host used before (the same agent, its binding's
// long-poll taken away).
//
//   npm run build && node bench/claim-latency.mjs [--rounds 40] [--dialects sqlite,postgres] [--json FILE]
//
// Per dialect one real `kiln-server serve` process (no local host; KILN_HOST_LISTEN on; SQLite in
// its data dir, or a throwaway PostgreSQL cluster), and one enrolled host identity. Rounds
// alternate the two modes, so drift and load fall on both alike: each round starts the host
// agent in its mode (the in-memory executor stands in for cargo), lets it settle, waits a random
// 0–500 ms (so a submission falls at every phase of the poll), then submits one job over the
// public API and measures, in this process, from just before the request to the agent's
// `attempt:start` (the placement in hand). The submission's own round trip is the baseline a
// claim cannot beat by much. The goal (21): a claim within milliseconds of submission on
// an idle host, no poll interval in the path.
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

requireBuilt(dist("src/main.js"), dist("src/testing/harness.js"));
const { silentLogger, systemClock } = await import("@kiln/contract");
const { onboardRepository, openStorage } = await import("@kiln/storage");
const {
  DEFAULT_CRATES_IO_INDEX,
  fetchCaCertificate,
  HostTlsIdentity,
  httpHostProtocol,
  newKeyAndSigningRequest,
  requestEnrollment,
  startMachineHost,
  sandboxIsolation,
} = await import("@kiln/host");
const { InMemoryExecutor } = await import("@kiln/host/testing");
const { personWithToken } = await import(dist("src/testing/harness.js"));
const { inlineSubmission } = await import(dist("src/testing/job-fixtures.js"));

const ROUNDS = Number(option("rounds", "40"));
const DIALECTS = option("dialects", "sqlite,postgres").split(",");
const JSON_OUT = option("json", null);
const POLL_MS = 500;
const REPOSITORY = "bench/claims";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const summary = (xs) => ({ p50: percentile(xs, 50), p99: percentile(xs, 99), max: Math.max(...xs), n: xs.length });

/** One dialect's run: a server, one enrolled host identity, rounds alternating the two modes. */
async function measure(dialect) {
  const env = { KILN_MASTER_KEY: randomBytes(32).toString("hex") };
  let cluster = null;
  if (dialect === "postgres") {
    cluster = await startThrowawayCluster();
    env.KILN_DATABASE_URL = cluster.url;
  }
  // The host listener's certificate names 127.0.0.1, the address the agent dials.
  const server = await startServeProcess(dialect, {
    dataDir: temp(`kiln-claim-bench-${dialect}-`),
    env: { KILN_HOST_TLS_NAMES: "127.0.0.1", ...env },
  });
  try {
    // The tenant and its token, written where the server keeps them.
    const storage = await openStorage(
      dialect === "postgres" ? { databaseUrl: cluster.url, dataDir: "/nonexistent" } : { dataDir: server.dataDir },
    );
    const owner = await personWithToken(storage, { role: "member", now: new Date() });
    await onboardRepository(storage, { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "bench" }, new Date());
    await storage.close();

    // The host enrolls as kiln-host does: the operator's token, the pinned CA, its own key.
    const minted = JSON.parse(await server.admin("host", "enrollment-token", "bench-host", "--json"));
    const ca = await fetchCaCertificate(server.hostEndpoint);
    if (ca.sha256 !== minted.ca_sha256) throw new Error("the listener presents another CA than the token's");
    const { keyPem, csrPem } = await newKeyAndSigningRequest();
    const issued = await requestEnrollment(server.hostEndpoint, {
      token: minted.enrollment_token,
      csrPem,
      caCertificatePem: ca.caCertificate,
    });
    const identity = HostTlsIdentity.inMemory({
      keyPem,
      certificatePem: issued.certificate,
      caCertificatePem: issued.caCertificate,
    });
    const longPoll = httpHostProtocol({ endpoint: server.hostEndpoint, identity });
    // The host before the long-poll: the same binding without it, so the agent polls every 500 ms.
    const { claimWaiting: _withoutLongPoll, ...polling } = longPoll;

    let keys = 0;
    const delays = { longPoll: [], poll: [], submit: [] };
    for (let round = 0; round < ROUNDS * 2; round++) {
      const mode = round % 2 === 0 ? "longPoll" : "poll";
      const started = new Map();
      const ended = new Map();
      const machine = await startMachineHost({
        hostId: "bench-host",
        protocol: mode === "longPoll" ? longPoll : polling,
        clock: systemClock,
        log: silentLogger,
        onEvent: (event) => {
          if (event.type === "attempt:start") started.get(event.jobId)?.(process.hrtime.bigint());
          if (event.type === "attempt:end") ended.get(event.jobId)?.();
          if (event.type.endsWith(":error")) log(`bench: host ${event.type}: ${event.error}`);
        },
        workRoot: temp("kiln-claim-bench-work-"),
        lineageRoot: null,
        scratchRoot: null,
        crateCache: { root: temp("kiln-claim-bench-crates-"), cratesIoIndex: DEFAULT_CRATES_IO_INDEX },
        vcpus: 2,
        memoryBytes: 2 ** 33,
        isolation: sandboxIsolation({ executor: new InMemoryExecutor(systemClock) }),
        resolveToolchain: async (name) => ({ name, path: "/nonexistent/toolchain" }),
      });
      try {
        // Settled: enrolled, and (long-poll) its first claim is waiting at the control plane.
        await sleep(300 + Math.random() * POLL_MS);
        keys += 1;
        const sent = process.hrtime.bigint();
        const response = await fetch(`${server.origin}/api/v4/jobs`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${owner.token}`,
            "idempotency-key": `claim-bench-${keys}`,
            "content-type": "application/json",
          },
          body: JSON.stringify(inlineSubmission(REPOSITORY)),
        });
        const answered = process.hrtime.bigint();
        const jobId = await response.json();
        if (response.status !== 200) throw new Error(`submit: ${response.status} ${JSON.stringify(jobId)}`);
        const claimedAt = await new Promise((resolve) => started.set(jobId, resolve));
        await new Promise((resolve) => ended.set(jobId, resolve));
        delays[mode].push(Number(claimedAt - sent) / 1e6);
        delays.submit.push(Number(answered - sent) / 1e6);
      } finally {
        await machine.stop();
      }
    }
    return Object.fromEntries(Object.entries(delays).map(([mode, xs]) => [mode, summary(xs)]));
  } finally {
    await server.stop();
    await cluster?.stop();
  }
}

log(`bench: ${cpus().length} CPUs, load ${loadavg()[0].toFixed(2)} before the run; ${ROUNDS} rounds per mode`);
const results = {};
try {
  for (const dialect of DIALECTS) {
    log(`bench: ${dialect}…`);
    results[dialect] = await measure(dialect);
  }
} finally {
  removeScratch();
}

const fmt = (x) => x.toFixed(1);
const out = [
  `jobs.submit → placement held by a remote kiln-host over mutual TLS, ${ROUNDS} jobs per mode (ms)`,
  "",
  "| dialect | mode | p50 | p99 | max | p50 ÷ long-poll p50 |",
  "| --- | --- | ---: | ---: | ---: | ---: |",
  ...Object.entries(results).flatMap(([dialect, r]) =>
    [
      ["(baseline: the submission's own round trip)", r.submit],
      ["long-poll claim", r.longPoll],
      ["500 ms poll (before)", r.poll],
    ].map(
      ([mode, s]) =>
        `| ${dialect} | ${mode} | ${fmt(s.p50)} | ${fmt(s.p99)} | ${fmt(s.max)} | ${(s.p50 / r.longPoll.p50).toFixed(1)}× |`,
    ),
  ),
  "",
  `load average after the run: ${loadavg()[0].toFixed(2)}`,
];
process.stdout.write(`${out.join("\n")}\n`);
if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify(results, null, 2));
