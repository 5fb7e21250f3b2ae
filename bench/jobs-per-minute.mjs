#!/usr/bin/env node
// Jobs per minute with one and with two kiln-hosts, and the control plane's share of the CPU
// (issue 17: the control plane must not be the bottleneck).
//
//   npm run build && node bench/jobs-per-minute.mjs [--jobs 16] [--rounds 1] [--crate generated|semver]
//                                                   [--vcpus 2] [--json FILE]
//
// The deployment of the scale-out test (packages/server/test/scale-out-cluster.ts, from dist):
// two real `kiln-server serve` processes (no embedded host) on one throwaway PostgreSQL cluster
// (scripts/postgres-cluster.mjs) and one s3rver bucket (KILN_BLOB_URL), and real `kiln-host`
// processes (bubblewrap sandbox, real cargo) speaking the host protocol over mutual TLS, each
// offered the same vCPUs (--vcpus, default 2: one kiln2-cpu job at a time). Each round runs
// the 1-host configuration, then the 2-host one, each on a fresh cluster. In each, --jobs jobs
// of a small crate (`cargo test`, kiln2-cpu) are submitted at once, alternately through both
// servers, every job to a repository of its own (so every job is a cold first job of its
// class and no job waits for another host's lineage); the clock runs from the first submission
// until the last job is terminal (read from the database every 100 ms).
//
// CPU seconds come from /proc/<pid>/stat (utime + stime, plus cutime + cstime: the children a
// process waited for) of the server processes, the kiln-host processes and the live PostgreSQL
// backends of the cluster's database, before and after, and for the sandboxes (cargo, rustc,
// the tests) from each attempt's cgroup (its report's unit.cpu_seconds). s3rver runs inside this bench process, whose own CPU is
// reported apart. On a 2-CPU machine two hosts share the same cores: the ratio shows whether
// the control plane holds a second host back (its CPU share and per-job overhead), not how
// hardware scales out.
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { startThrowawayCluster } from "../scripts/postgres-cluster.mjs";
import { dist, requireBuilt } from "./support/built-packages.mjs";
import { inlineJob } from "./support/inline-job.mjs";
import { option } from "./support/options.mjs";
import { log } from "./support/output.mjs";
import { median } from "./support/statistics.mjs";

requireBuilt(dist("test/scale-out-cluster.js"));
const { TERMINAL_JOB_STATUSES } = await import("@kiln/contract");
const { startScaleOutCluster, postgresCpuSecondsOf } = await import(dist("test/scale-out-cluster.js"));
const { testedCrate } = await import(dist("src/testing/crates.js"));
const { debianCrate, debianCrateInstalled } = await import(dist("src/testing/debian-crates.js"));

const JOBS = Number(option("jobs", "16"));
const ROUNDS = Number(option("rounds", "1"));
const CRATE = option("crate", "generated");
const VCPUS = Number(option("vcpus", "2"));
const JSON_OUT = option("json", null);

function crateFiles() {
  if (CRATE === "generated") return testedCrate("widget", 0);
  if (CRATE === "semver") {
    if (!debianCrateInstalled("semver", "1.0.14"))
      throw new Error("semver 1.0.14 is not installed (librust-semver-dev)");
    return debianCrate("semver", "1.0.14");
  }
  throw new Error(`--crate generated|semver, not ${CRATE}`);
}

const sum = (xs) => xs.reduce((n, x) => n + (x ?? 0), 0);
const selfCpuSeconds = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

/** One configuration on a fresh cluster: `hosts` kiln-hosts, JOBS jobs submitted at once. */
async function measure(hosts, round) {
  const cluster = await startScaleOutCluster({ servers: 2, hosts, hostVcpus: VCPUS, hostIdPrefix: `bench-${hosts}h` });
  try {
    const { tenant, token } = await cluster.tenant();
    const repositories = Array.from({ length: JOBS }, (_, i) => `bench/jpm-${round}-${hosts}h-${i}`);
    for (const repository of repositories) await cluster.onboard(tenant, repository);
    const files = crateFiles();
    const cpu = () => ({
      servers: sum(cluster.servers.map((s) => s.cpuSeconds())),
      hosts: sum(cluster.hosts.map((h) => h.cpuSeconds())),
      postgres: postgresCpuSecondsOf(cluster.databaseName),
      bench: selfCpuSeconds(),
    });
    const before = cpu();
    const load = loadavg()[0];
    const started = process.hrtime.bigint();
    // As a client does: a 503 `unavailable` is retried after its retry_after_seconds with the
    // same idempotency key (so it performs once); the retries are counted and the servers'
    // logged failures printed.
    let retried = 0;
    const submitOne = async (repository, i) => {
      const api = cluster.api(i % cluster.servers.length, token);
      for (;;) {
        const res = await api("POST", "/api/v4/jobs", {
          key: `jpm-${i}`,
          body: inlineJob(repository, "kiln2-cpu", files),
        });
        if (res.status === 200) return res.json();
        if (res.status !== 503) throw new Error(`jobs.submit answered ${res.status}: ${res.body}`);
        retried += 1;
        log(`jobs.submit answered 503, retrying: ${res.body}`);
        await new Promise((resolve) => setTimeout(resolve, (res.json().retry_after_seconds ?? 1) * 1000));
      }
    };
    const ids = await Promise.all(repositories.map(submitOne));
    let done = 0;
    while (done < JOBS) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const rows = await cluster.storage.db
        .selectFrom("jobs")
        .select(["status"])
        .where("tenant_id", "=", tenant)
        .where("status", "in", [...TERMINAL_JOB_STATUSES])
        .execute();
      done = rows.length;
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const after = cpu();
    const rows = await cluster.storage.db.selectFrom("jobs").select(["id", "status"]).where("id", "in", ids).execute();
    const failed = rows.filter((r) => r.status !== "passed");
    if (failed.length > 0) throw new Error(`${failed.length} job(s) did not pass: ${JSON.stringify(failed)}`);
    const attempts = await cluster.storage.db
      .selectFrom("attempts")
      .select(["host_id", "report", "started_at", "finished_at"])
      .where("job_id", "in", ids)
      .execute();
    // The sandboxes' CPU as each attempt's cgroup counted it (cpu.stat usage_usec; the unit's
    // cpu_seconds in the attempt's report): their processes are not the kiln-host's waited children.
    const sandboxes = sum(attempts.map((a) => (a.report === null ? 0 : (JSON.parse(a.report).unit?.cpu_seconds ?? 0))));
    const perHost = Object.fromEntries(
      cluster.hosts.map((h) => [h.id, attempts.filter((a) => a.host_id === h.id).length]),
    );
    // Where a host's slot went: each attempt's own time (claim to finish report: materializing,
    // cargo, publishing, the lineage save) and, between one attempt's finish and the next one's
    // claim on the same host while jobs waited, the slot idle (the claim poll and its round trip).
    const attemptSeconds = attempts.map((a) => (Date.parse(a.finished_at) - Date.parse(a.started_at)) / 1000);
    const idleGaps = [];
    for (const host of cluster.hosts) {
      const mine = attempts
        .filter((a) => a.host_id === host.id)
        .sort((a, b) => a.started_at.localeCompare(b.started_at));
      for (let i = 1; i < mine.length; i++) {
        idleGaps.push((Date.parse(mine[i].started_at) - Date.parse(mine[i - 1].finished_at)) / 1000);
      }
    }
    const mean = (xs) => (xs.length === 0 ? 0 : sum(xs) / xs.length);
    // The attempt's phases as the host reported them (mean seconds per phase name).
    const phaseSeconds = {};
    for (const a of attempts) {
      for (const phase of a.report === null ? [] : (JSON.parse(a.report).phases ?? [])) {
        if (phase.duration_ms === null) continue;
        phaseSeconds[phase.name] = [...(phaseSeconds[phase.name] ?? []), phase.duration_ms / 1000];
      }
    }
    const meanPhaseSeconds = Object.fromEntries(Object.entries(phaseSeconds).map(([name, xs]) => [name, mean(xs)]));
    const used = {
      servers: after.servers - before.servers,
      hostAgents: after.hosts - before.hosts,
      sandboxes,
      hosts: after.hosts - before.hosts + sandboxes,
      postgres: Math.max(0, after.postgres - before.postgres),
      bench: after.bench - before.bench,
    };
    const controlPlane = used.servers + used.postgres;
    const result = {
      hosts,
      round,
      jobs: JOBS,
      seconds,
      jobsPerMinute: (JOBS * 60) / seconds,
      cpuSeconds: used,
      controlPlaneShare: controlPlane / (controlPlane + used.hosts),
      controlPlaneMsPerJob: (controlPlane * 1000) / JOBS,
      hostCpuSecondsPerJob: used.hosts / JOBS,
      attemptsPerHost: perHost,
      meanAttemptSeconds: mean(attemptSeconds),
      meanIdleGapSeconds: mean(idleGaps),
      meanPhaseSeconds,
      attempts: attempts.length,
      load,
    };
    log(
      `round ${round}, ${hosts} host(s): ${JOBS} jobs in ${seconds.toFixed(1)} s = ${result.jobsPerMinute.toFixed(1)} jobs/min; ` +
        `CPU s: servers ${used.servers.toFixed(1)}, postgres ${used.postgres.toFixed(1)}, host agents ${used.hostAgents.toFixed(1)}, ` +
        `sandboxes ${used.sandboxes.toFixed(1)}, ` +
        `bench+s3rver ${used.bench.toFixed(1)}; control plane ${(result.controlPlaneShare * 100).toFixed(1)} % ` +
        `(${result.controlPlaneMsPerJob.toFixed(0)} ms/job); attempts per host ${JSON.stringify(perHost)}; ` +
        `attempt ${result.meanAttemptSeconds.toFixed(2)} s (${Object.entries(meanPhaseSeconds)
          .map(([name, x]) => `${name} ${x.toFixed(2)}`)
          .join(
            ", ",
          )}), slot idle between attempts ${result.meanIdleGapSeconds.toFixed(2)} s (means); load ${load.toFixed(1)}`,
    );
    if (retried > 0) {
      for (const server of cluster.servers) {
        const failures = server
          .output()
          .split("\n")
          .filter((line) => line.includes('"level":50'));
        log(`server ${server.name} logged ${failures.length} failure(s):\n${failures.join("\n").slice(0, 8000)}`);
      }
    }
    result.submitRetries = retried;
    return result;
  } finally {
    await cluster.close();
  }
}

log(
  `bench: ${cpus().length} CPUs, load ${loadavg()[0].toFixed(2)} before the run; ${JOBS} jobs of ${CRATE}, ${VCPUS} vCPUs per host, ${ROUNDS} round(s)`,
);
const postgres = await startThrowawayCluster();
const results = [];
try {
  process.env.KILN_TEST_POSTGRES_URL = postgres.url;
  for (let round = 1; round <= ROUNDS; round++) {
    results.push(await measure(1, round));
    results.push(await measure(2, round));
  }
} finally {
  await postgres.stop();
}

const of = (hosts) => results.filter((r) => r.hosts === hosts);
const summary = [1, 2].map((hosts) => ({
  hosts,
  jobsPerMinute: median(of(hosts).map((r) => r.jobsPerMinute)),
  controlPlaneShare: median(of(hosts).map((r) => r.controlPlaneShare)),
  controlPlaneMsPerJob: median(of(hosts).map((r) => r.controlPlaneMsPerJob)),
  hostCpuSecondsPerJob: median(of(hosts).map((r) => r.hostCpuSecondsPerJob)),
  meanAttemptSeconds: median(of(hosts).map((r) => r.meanAttemptSeconds)),
  meanIdleGapSeconds: median(of(hosts).map((r) => r.meanIdleGapSeconds)),
}));
const [one, two] = summary;
console.log(
  "| hosts | jobs/min | control plane CPU share | control plane CPU per job | host CPU per job | attempt | slot idle between attempts |",
);
console.log(
  "| ----- | -------- | ----------------------- | ------------------------- | ---------------- | ------- | -------------------------- |",
);
for (const s of summary) {
  console.log(
    `| ${s.hosts} | ${s.jobsPerMinute.toFixed(1)} | ${(s.controlPlaneShare * 100).toFixed(1)} % | ${s.controlPlaneMsPerJob.toFixed(0)} ms | ${s.hostCpuSecondsPerJob.toFixed(2)} s | ${s.meanAttemptSeconds.toFixed(2)} s | ${s.meanIdleGapSeconds.toFixed(2)} s |`,
  );
}
console.log(`(medians over ${ROUNDS} round(s))`);
// Each round's two configurations ran back to back, under about the same load: their ratio is
// the paired comparison, and its median the headline.
const ratios = Array.from({ length: ROUNDS }, (_, i) => {
  const [a, b] = [1, 2].map((hosts) => results.find((r) => r.round === i + 1 && r.hosts === hosts));
  return b.jobsPerMinute / a.jobsPerMinute;
});
console.log(
  `2 hosts / 1 host: ${median(ratios).toFixed(2)} × jobs per minute (median of the rounds' ratios ${ratios.map((r) => r.toFixed(2)).join(", ")})`,
);
// What one core could place at the control plane's measured cost per job (servers + PostgreSQL).
const perJobMs = Math.max(one.controlPlaneMsPerJob, two.controlPlaneMsPerJob);
console.log(
  `control plane at ${perJobMs.toFixed(0)} ms of CPU per job: one core serves about ${((60 * 1000) / perJobMs).toFixed(0)} jobs/min`,
);
if (JSON_OUT !== null) writeFileSync(JSON_OUT, JSON.stringify({ results, summary, ratios }, null, 2));
