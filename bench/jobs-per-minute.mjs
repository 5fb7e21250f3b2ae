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
import { existsSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startThrowawayCluster } from "../scripts/postgres-cluster.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = (path) => join(root, "packages", "server", "dist", "test", path);
if (!existsSync(dist("scale-out-cluster.js"))) {
  process.stderr.write("bench: build first: npm run build\n");
  process.exit(1);
}
const { startScaleOutCluster, postgresCpuSecondsOf } = await import(dist("scale-out-cluster.js"));
const { Jobs } = await import(dist("e2e-jobs.js"));
const { testedCrate } = await import(dist("crates.js"));
const { debianCrate, debianCrateInstalled } = await import(dist("debian-crates.js"));

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}
const JOBS = Number(option("jobs", "16"));
const ROUNDS = Number(option("rounds", "1"));
const CRATE = option("crate", "generated");
const VCPUS = Number(option("vcpus", "2"));
const JSON_OUT = option("json", null);
const log = (line) => process.stderr.write(`${line}\n`);

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
    const ids = await Promise.all(
      repositories.map((repository, i) =>
        new Jobs(cluster.api(i % cluster.servers.length, token), repository).submit(files, `jpm-${i}`),
      ),
    );
    let done = 0;
    while (done < JOBS) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const rows = await cluster.storage.db
        .selectFrom("jobs")
        .select(["status"])
        .where("tenant_id", "=", tenant)
        .where("status", "in", ["passed", "failed", "cancelled"])
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
      .select(["host_id", "report"])
      .where("job_id", "in", ids)
      .execute();
    // The sandboxes' CPU as each attempt's cgroup counted it (cpu.stat usage_usec; the unit's
    // cpu_seconds in the attempt's report): their processes are not the kiln-host's waited children.
    const sandboxes = sum(attempts.map((a) => (a.report === null ? 0 : (JSON.parse(a.report).unit?.cpu_seconds ?? 0))));
    const perHost = Object.fromEntries(
      cluster.hosts.map((h) => [h.id, attempts.filter((a) => a.host_id === h.id).length]),
    );
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
      attempts: attempts.length,
      load,
    };
    log(
      `round ${round}, ${hosts} host(s): ${JOBS} jobs in ${seconds.toFixed(1)} s = ${result.jobsPerMinute.toFixed(1)} jobs/min; ` +
        `CPU s: servers ${used.servers.toFixed(1)}, postgres ${used.postgres.toFixed(1)}, host agents ${used.hostAgents.toFixed(1)}, ` +
        `sandboxes ${used.sandboxes.toFixed(1)}, ` +
        `bench+s3rver ${used.bench.toFixed(1)}; control plane ${(result.controlPlaneShare * 100).toFixed(1)} % ` +
        `(${result.controlPlaneMsPerJob.toFixed(0)} ms/job); attempts per host ${JSON.stringify(perHost)}; load ${load.toFixed(1)}`,
    );
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

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const of = (hosts) => results.filter((r) => r.hosts === hosts);
const summary = [1, 2].map((hosts) => ({
  hosts,
  jobsPerMinute: median(of(hosts).map((r) => r.jobsPerMinute)),
  controlPlaneShare: median(of(hosts).map((r) => r.controlPlaneShare)),
  controlPlaneMsPerJob: median(of(hosts).map((r) => r.controlPlaneMsPerJob)),
  hostCpuSecondsPerJob: median(of(hosts).map((r) => r.hostCpuSecondsPerJob)),
}));
const [one, two] = summary;
console.log("| hosts | jobs/min | control plane CPU share | control plane CPU per job | host CPU per job |");
console.log("| ----- | -------- | ----------------------- | ------------------------- | ---------------- |");
for (const s of summary) {
  console.log(
    `| ${s.hosts} | ${s.jobsPerMinute.toFixed(1)} | ${(s.controlPlaneShare * 100).toFixed(1)} % | ${s.controlPlaneMsPerJob.toFixed(0)} ms | ${s.hostCpuSecondsPerJob.toFixed(2)} s |`,
  );
}
console.log(`2 hosts / 1 host: ${(two.jobsPerMinute / one.jobsPerMinute).toFixed(2)} × jobs per minute`);
// What one core could place at the control plane's measured cost per job (servers + PostgreSQL).
const perJobMs = Math.max(one.controlPlaneMsPerJob, two.controlPlaneMsPerJob);
console.log(
  `control plane at ${perJobMs.toFixed(0)} ms of CPU per job: one core serves about ${((60 * 1000) / perJobMs).toFixed(0)} jobs/min`,
);
if (JSON_OUT !== null) writeFileSync(JSON_OUT, JSON.stringify({ results, summary }, null, 2));
