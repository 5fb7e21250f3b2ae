#!/usr/bin/env node
// Dependency provisioning: the host's dependency gateway (DependencyGateway.provide with a
// Cargo.lock) against `cargo fetch`, both against the same sparse registry in the same run.
//
//   npx tsc -b packages/host && node bench/dependency-gateway.mjs [--runs 5] [--crates serde_json,tokio]
//       [--fixture worker|same-thread] [--json FILE]
//
// Per scenario, cargo first locks the project against the fixture (`cargo generate-lockfile`);
// every measurement then gets that Cargo.lock. Each round starts its own fixture registry (a
// new port, so no run reuses another's pooled connections) and measures, kiln and cargo in
// alternating order:
//   - cargo fetch, cold: `cargo fetch --locked` with an empty CARGO_HOME (on disk, in tmpdir)
//     whose config replaces crates-io with the fixture (`registry = "<indexUrl>"`); then warm
//     (same CARGO_HOME again), and cold with the CARGO_HOME on /dev/shm (references);
//   - kiln, cold: a fresh DependencyGateway with an empty crate cache (on disk, as the host's
//     is), provide() with the lock;
//   - kiln, warm: the same gateway again, same lock (every crate from the cache);
//   - kiln in its worker, cold and warm: the same through WorkerGateway, as the host agent runs
//     it (a child process per attempt, started ahead and idle a second before it is asked, as on a
//     host past its first attempt; no cgroup, so the figure is the process's own cost, not a CPU
//     quota's), with a crate cache of its own;
//   - reference: `cargo fetch --offline` with the gateway's generated configuration and an
//     empty CARGO_HOME on /dev/shm: cargo unpacking the gateway's local registry, work a kiln
//     job's cargo does in the sandbox and `cargo fetch` does while fetching.
// Round 0 is an unmeasured warm-up. The fixture runs on a worker thread by default; cargo is
// spawned asynchronously either way. Scratch trees are removed when the bench ends, not
// between runs (ext4 without a journal slows file creation after deletions; see
// docs/benchmarks.md).
import { execFile, execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { root } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";
import { log } from "./support/output.mjs";
import { median } from "./support/statistics.mjs";

const hostDist = join(root, "packages", "host", "dist", "src");
const { DependencyGateway } = await import(join(hostDist, "gateway", "dependency-gateway.js"));
const { WorkerGateway } = await import(join(hostDist, "gateway", "worker-gateway.js"));
const { CrateCache } = await import(join(hostDist, "gateway", "crate-cache.js"));
const { SparseRegistryClient } = await import(join(hostDist, "gateway", "sparse-registry-client.js"));
const { startSparseRegistry } = await import(join(hostDist, "testing", "sparse-registry.js"));
const { systemClock } = await import(join(root, "packages", "contract", "dist", "src", "clock.js"));

const RUNS = Number(option("runs", "5"));
const JSON_OUT = option("json", null);
/** `worker` (default): the fixture registry runs on a thread of its own; `same-thread`: on the bench's event loop. */
const FIXTURE = option("fixture", "worker");
if (FIXTURE !== "worker" && FIXTURE !== "same-thread") throw new Error("--fixture: worker or same-thread");
/** What each scenario's project depends on; the fixture serves the crate and its closure. */
const SCENARIOS = {
  serde_json: { fixture: ["serde_json"], dependencies: `serde_json = "1"` },
  tokio: { fixture: ["tokio"], dependencies: `tokio = { version = "1", features = ["full"] }` },
};
const names = option("crates", "serde_json,tokio").split(",");
for (const name of names) if (!(name in SCENARIOS)) throw new Error(`--crates: no scenario ${name}`);

// The toolchain's own cargo, not rustup's proxy: the proxy's start-up is not cargo fetch's work.
const CARGO = (() => {
  try {
    return execFileSync("rustup", ["which", "cargo"], { encoding: "utf8" }).trim();
  } catch {
    return "cargo";
  }
})();

const ms = (x) => `${Math.round(x)} ms`;
const secs = (x) => `${(x / 1000).toFixed(3)} s`;

/** Asynchronous: the fixture registry answers from this process's event loop. */
function cargo(args, cwd, cargoHome) {
  return new Promise((resolve) => {
    const started = performance.now();
    execFile(
      CARGO,
      args,
      {
        cwd,
        env: { ...process.env, CARGO_HOME: cargoHome, CARGO_TERM_COLOR: "never" },
        timeout: 600_000,
        maxBuffer: 64 * 2 ** 20,
      },
      (error, stdout, stderr) =>
        resolve({
          code: error === null ? 0 : typeof error.code === "number" ? error.code : -1,
          stdout,
          stderr,
          ms: performance.now() - started,
        }),
    );
  });
}

const must = (run, what) => {
  if (run.code !== 0) throw new Error(`${what} failed (${run.code}):\n${run.stderr.slice(-3000)}`);
  return run;
};

/** A CARGO_HOME whose configuration replaces crates-io with the fixture, as `cargo fetch` is given it. */
async function cargoHomeFor(dir, indexUrl) {
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, "config.toml"),
    `[source.crates-io]\nreplace-with = "kiln-bench-fixture"\n\n[source.kiln-bench-fixture]\nregistry = ${JSON.stringify(indexUrl)}\n`,
  );
  return dir;
}

async function project(dir, dependencies, lock) {
  await mkdir(join(dir, "src"), { recursive: true });
  await writeFile(
    join(dir, "Cargo.toml"),
    `[package]\nname = "bench"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n${dependencies}\n`,
  );
  await writeFile(join(dir, "src", "lib.rs"), "");
  if (lock !== null) await writeFile(join(dir, "Cargo.lock"), lock);
  return dir;
}

async function treeStats(dir) {
  let files = 0;
  let bytes = 0;
  const walk = async (d) => {
    for (const entry of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = join(d, entry.name);
      if (entry.isDirectory()) await walk(p);
      else if (entry.isFile()) {
        files++;
        bytes += (await stat(p)).size;
      }
    }
  };
  await walk(dir);
  return { files, bytes };
}

// ---- the fixture registry ------------------------------------------------------------------

const FIXTURE_THREAD = `
const { parentPort, workerData } = require("node:worker_threads");
import(workerData.module).then(async ({ startSparseRegistry }) => {
  const registry = await startSparseRegistry(workerData.options);
  const crates = Object.fromEntries(registry.crates);
  parentPort.postMessage({ indexUrl: registry.indexUrl, crates });
  parentPort.once("message", async () => {
    await registry.close();
    parentPort.postMessage("closed");
  });
});
`;

/**
 * startSparseRegistry on its own thread (so the registry answering does not queue behind the
 * gateway's work on one event loop, as it does not behind cargo's, a process of its own), or
 * on this one.
 */
async function startFixture(options) {
  if (FIXTURE === "same-thread") return startSparseRegistry(options);
  const worker = new Worker(FIXTURE_THREAD, {
    eval: true,
    workerData: { module: pathToFileURL(join(hostDist, "testing", "sparse-registry.js")).href, options },
  });
  const started = await new Promise((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  return {
    indexUrl: started.indexUrl,
    crates: new Map(Object.entries(started.crates)),
    async close() {
      const closed = new Promise((resolve) => worker.once("message", resolve));
      worker.postMessage("close");
      await closed;
      await worker.terminate();
    },
  };
}

// ---- phase timing: wrappers around the gateway's collaborators (no gateway code changes) ----

/** Intervals per phase of the provide() in progress; null when none is being traced. */
let trace = null;
const span = async (phase, work) => {
  const t = trace;
  const start = performance.now();
  try {
    return await work();
  } finally {
    t?.[phase].push([start, performance.now()]);
  }
};
const PHASES = ["lookup", "index", "download", "store", "scan", "place"];
{
  const index = SparseRegistryClient.prototype.index;
  SparseRegistryClient.prototype.index = function (name) {
    return span("index", () => index.call(this, name));
  };
  const download = SparseRegistryClient.prototype.download;
  SparseRegistryClient.prototype.download = function (...args) {
    return span("download", () => download.apply(this, args));
  };
  const lookup = CrateCache.prototype.lookup;
  CrateCache.prototype.lookup = function (...args) {
    return span("lookup", () => lookup.apply(this, args));
  };
  // obtain = lookup, then (on a miss) the gateway's fetch callback (index line + download),
  // then #store: SHA-256 of the bytes, mkdir, write the crate and its index line, rename.
  // "store" is the time from the fetch callback's end to obtain's end.
  const obtain = CrateCache.prototype.obtain;
  CrateCache.prototype.obtain = function (scope, sha256, what, fetch) {
    const t = trace;
    let fetched = null;
    const timedFetch = async (file) => {
      try {
        return await fetch(file);
      } finally {
        fetched = performance.now();
      }
    };
    return obtain.call(this, scope, sha256, what, timedFetch).finally(() => {
      if (fetched !== null) t?.store.push([fetched, performance.now()]);
    });
  };
  // Inside store: the cache's byte total for its bound (a walk of the cache the first time).
  const totalBytes = CrateCache.prototype.totalBytes;
  CrateCache.prototype.totalBytes = function () {
    return span("scan", () => totalBytes.call(this));
  };
  const place = CrateCache.place;
  CrateCache.place = (crate, target) => span("place", () => place.call(CrateCache, crate, target));
}

/** Wall time during which at least one interval is open. */
function unionMs(intervals) {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let total = 0;
  let end = Number.NEGATIVE_INFINITY;
  for (const [s, e] of sorted) {
    if (s > end) {
      total += e - s;
      end = e;
    } else if (e > end) {
      total += e - end;
      end = e;
    }
  }
  return total;
}

function provideRequest(dir, lock, depsDir) {
  return {
    tenant: "bench",
    attemptId: `bench-${depsDir.split("/").slice(-2).join("-")}`,
    workspaceDir: dir,
    lockfile: lock,
    manifestPaths: ["Cargo.toml"],
    depsDir,
    sandboxDepsDir: depsDir,
    credentials: async () => [],
    generateLockfile: async () => {
      throw new Error("the bench always gives the gateway a Cargo.lock");
    },
    log: () => {},
    signal: new AbortController().signal,
  };
}

/** provide() through the worker process: its total only (its phases are in another process). */
async function provideInWorker(gateway, dir, lock, label) {
  const started = performance.now();
  const provided = await gateway.provide(provideRequest(dir, lock, join(dir, label)));
  return { ms: performance.now() - started, provided };
}

async function provide(gateway, dir, lock, label) {
  const depsDir = join(dir, label);
  trace = Object.fromEntries(PHASES.map((p) => [p, []]));
  const t = trace;
  const started = performance.now();
  const provided = await gateway.provide({
    ...provideRequest(dir, lock, depsDir),
  });
  const ended = performance.now();
  trace = null;
  const all = PHASES.flatMap((p) => t[p]);
  const first = Math.min(...all.map(([s]) => s));
  const last = Math.max(...all.map(([, e]) => e));
  const phases = Object.fromEntries(PHASES.map((p) => [p, unionMs(t[p])]));
  phases.perCrate = unionMs(all);
  phases.setup = first - started; // #targets (reads .cargo/config.toml files), rm + mkdir of the deps dir, lock parse
  phases.finish = ended - last; // the local registries' index files and the configuration
  phases.sumDownload = t.download.reduce((a, [s, e]) => a + e - s, 0);
  phases.sumIndex = t.index.reduce((a, [s, e]) => a + e - s, 0);
  phases.sumStore = t.store.reduce((a, [s, e]) => a + e - s, 0);
  phases.sumScan = t.scan.reduce((a, [s, e]) => a + e - s, 0);
  phases.scans = t.scan.length;
  phases.sumPlace = t.place.reduce((a, [s, e]) => a + e - s, 0);
  return { ms: ended - started, provided, depsDir, phases };
}

// ---- the run ------------------------------------------------------------------------------

const scratch = await mkdtemp(join(tmpdir(), "kiln-bench-gateway-"));
// A kiln job's CARGO_HOME is on the host's memory-backed scratch root (/dev/shm, see
// host/src/agent/scratch-root.ts): cargo unpacks the gateway's crates there.
const memoryScratch = await mkdtemp(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "kiln-bench-gateway-"));
const crateWork = join(scratch, "fixture-crates"); // .crate files built once, reused by every round's fixture
const loadBefore = loadavg()[0];
const results = {};
try {
  for (const name of names) {
    const scenario = SCENARIOS[name];
    // The lock: what cargo locks for the project against the fixture.
    const setup = await startFixture({ crates: scenario.fixture, workDir: crateWork });
    let lock;
    let fixtureCrates;
    try {
      const dir = await project(join(scratch, name, "lock"), scenario.dependencies, null);
      const home = await cargoHomeFor(join(scratch, name, "lock-home"), setup.indexUrl);
      must(await cargo(["generate-lockfile"], dir, home), `${name}: cargo generate-lockfile`);
      lock = await readFile(join(dir, "Cargo.lock"), "utf8");
      fixtureCrates = [...setup.crates.values()].reduce((n, v) => n + v.length, 0);
    } finally {
      await setup.close();
    }
    const lockedNames = [
      ...lock.matchAll(/\[\[package\]\]\nname = "([^"]+)"\nversion = "([^"]+)"\nsource = "registry\+/g),
    ];
    log(
      `gateway: ${name}: the fixture serves ${fixtureCrates} crates; cargo locks ${lockedNames.length} registry crates: ${lockedNames.map((m) => `${m[1]}@${m[2]}`).join(" ")}`,
    );

    const samples = {
      cargoCold: [],
      cargoWarm: [],
      cargoColdMemory: [],
      kilnCold: [],
      kilnWarm: [],
      workerCold: [],
      workerWarm: [],
      unpack: [],
      coldPhases: [],
      warmPhases: [],
    };
    let crateBytes = 0;
    let cargoHomeTree = null;
    let unpackTree = null;
    // Round 0 is a warm-up, not measured: the process's first fetch() loads undici, the first
    // cargo run pages in the toolchain.
    for (let round = 0; round <= RUNS; round++) {
      const measured = round > 0;
      const registry = await startFixture({ crates: scenario.fixture, workDir: crateWork });
      try {
        const base = join(scratch, name, `round-${round}`);
        const cargoSide = async () => {
          const dir = await project(join(base, "cargo"), scenario.dependencies, lock);
          const home = await cargoHomeFor(join(base, "cargo-home"), registry.indexUrl);
          const cold = must(await cargo(["fetch", "--locked"], dir, home), `${name}: cargo fetch`);
          const warm = must(await cargo(["fetch", "--locked"], dir, home), `${name}: cargo fetch (warm)`);
          const memoryHome = await cargoHomeFor(
            join(memoryScratch, name, `round-${round}`, "cargo-home"),
            registry.indexUrl,
          );
          const memory = must(await cargo(["fetch", "--locked"], dir, memoryHome), `${name}: cargo fetch (tmpfs)`);
          if (measured) {
            samples.cargoCold.push(cold.ms);
            samples.cargoWarm.push(warm.ms);
            samples.cargoColdMemory.push(memory.ms);
          }
          cargoHomeTree ??= await treeStats(join(home, "registry"));
          return `cargo fetch cold ${ms(cold.ms)}, warm ${ms(warm.ms)}, cold with CARGO_HOME on tmpfs ${ms(memory.ms)}`;
        };
        const kilnSide = async () => {
          const dir = await project(join(base, "kiln"), scenario.dependencies, lock);
          const gateway = new DependencyGateway({
            cacheRoot: join(base, "crate-cache"),
            cacheMaxBytes: 10 * 2 ** 30,
            cratesIoIndex: registry.indexUrl,
            clock: systemClock,
          });
          const cold = await provide(gateway, dir, lock, "deps-cold");
          const warm = await provide(gateway, dir, lock, "deps-warm");
          const inWorker = new WorkerGateway({
            config: {
              cacheRoot: join(base, "worker-crate-cache"),
              cacheMaxBytes: 10 * 2 ** 30,
              cratesIoIndex: registry.indexUrl,
            },
            cgroupParentName: null,
          });
          // As on a host past its start: the attempt's worker was started ahead and waits idle.
          inWorker.prepare();
          await new Promise((resolve) => setTimeout(resolve, 1000));
          const workerCold = await provideInWorker(inWorker, dir, lock, "worker-deps-cold");
          await new Promise((resolve) => setTimeout(resolve, 1000));
          const workerWarm = await provideInWorker(inWorker, dir, lock, "worker-deps-warm");
          inWorker.close();
          const n = lockedNames.length;
          if (cold.provided.cache.misses !== n || warm.provided.cache.hits !== n || warm.provided.cache.misses !== 0) {
            throw new Error(
              `${name}: unexpected cache outcome ${JSON.stringify([cold.provided.cache, warm.provided.cache])}`,
            );
          }
          crateBytes = cold.provided.cache.bytesFetched;
          if (measured) {
            samples.kilnCold.push(cold.ms);
            samples.kilnWarm.push(warm.ms);
            samples.workerCold.push(workerCold.ms);
            samples.workerWarm.push(workerWarm.ms);
            samples.coldPhases.push(cold.phases);
            samples.warmPhases.push(warm.phases);
          }
          // Reference: cargo accepts what the gateway assembled, offline, and unpacks its .crate
          // files into a fresh CARGO_HOME — work a kiln job's cargo does in the sandbox, where
          // `cargo fetch` above did it while fetching.
          const home = join(memoryScratch, name, `round-${round}`, "unpack-home");
          await mkdir(home, { recursive: true });
          const unpack = must(
            await cargo(["--config", join(warm.depsDir, "config.toml"), "fetch", "--locked", "--offline"], dir, home),
            `${name}: cargo fetch --offline with the gateway's configuration`,
          );
          if (measured) samples.unpack.push(unpack.ms);
          unpackTree ??= await treeStats(join(home, "registry"));
          return `kiln cold ${ms(cold.ms)}, warm ${ms(warm.ms)}; in its worker cold ${ms(workerCold.ms)}, warm ${ms(workerWarm.ms)}; cargo unpacking the gateway's registry ${ms(unpack.ms)}`;
        };
        const order = round % 2 === 0 ? [cargoSide, kilnSide] : [kilnSide, cargoSide];
        const lines = [];
        for (const side of order) lines.push(await side());
        log(`gateway: ${name} ${measured ? `run ${round}/${RUNS}` : "warm-up"}: ${lines.join("; ")}`);
      } finally {
        await registry.close();
      }
    }
    results[name] = {
      locked: lockedNames.map((m) => `${m[1]}@${m[2]}`),
      crateBytes,
      cargoHomeTree,
      unpackTree,
      samples,
    };
  }
} finally {
  await rm(scratch, { recursive: true, force: true });
  await rm(memoryScratch, { recursive: true, force: true });
}
const loadAfter = loadavg()[0];

// ---- the report ---------------------------------------------------------------------------

const out = [
  `machine: ${cpus().length} CPUs (${cpus()[0]?.model}); ${execFileSync(CARGO, ["--version"], { encoding: "utf8" }).trim()}; node ${process.version}; runs ${RUNS}; fixture registry on ${FIXTURE === "worker" ? "a worker thread" : "the bench's event loop"}; 1-minute load ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after`,
  "",
  "| crate | locked crates (.crate bytes) | `cargo fetch` cold | kiln cold | kiln cold / cargo fetch | ≤ 1.2× | kiln warm | ≤ 0.2 s | kiln in its worker, cold | warm | `cargo fetch` warm | `cargo fetch` cold, CARGO_HOME on tmpfs | cargo unpacking the gateway's registry (tmpfs) |",
  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
];
for (const [name, r] of Object.entries(results)) {
  const s = r.samples;
  const ratio = median(s.kilnCold) / median(s.cargoCold);
  out.push(
    `| ${name} | ${r.locked.length} (${(r.crateBytes / 1e6).toFixed(2)} MB) | ${secs(median(s.cargoCold))} | ${secs(median(s.kilnCold))} | ${ratio.toFixed(2)}× | ${ratio <= 1.2 ? "pass" : "miss"} | ${secs(median(s.kilnWarm))} | ${median(s.kilnWarm) <= 200 ? "pass" : "miss"} | ${secs(median(s.workerCold))} (${(median(s.workerCold) / median(s.cargoCold)).toFixed(2)}× cargo fetch) | ${secs(median(s.workerWarm))} | ${secs(median(s.cargoWarm))} | ${secs(median(s.cargoColdMemory))} (kiln cold ${(median(s.kilnCold) / median(s.cargoColdMemory)).toFixed(2)}×) | ${secs(median(s.unpack))} |`,
  );
}
out.push(
  "",
  "Where kiln's time goes (medians, ms; phases overlap across the 8 crates in flight, so each is the wall time during which at least one crate was in it; Σ is the sum over crates):",
  "",
  "| crate | run | total | setup | lookup | index | download (Σ) | verify + store (Σ) | of which cache total (Σ) | place (Σ) | index files + config |",
  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
);
for (const [name, r] of Object.entries(results)) {
  for (const [label, list, totals] of [
    ["cold", r.samples.coldPhases, r.samples.kilnCold],
    ["warm", r.samples.warmPhases, r.samples.kilnWarm],
  ]) {
    const m = (key) => median(list.map((p) => p[key]));
    const f = (x) => x.toFixed(1);
    out.push(
      `| ${name} | ${label} | ${f(median(totals))} | ${f(m("setup"))} | ${f(m("lookup"))} | ${f(m("index"))} | ${f(m("download"))} (${f(m("sumDownload"))}) | ${f(m("store"))} (${f(m("sumStore"))}) | ${f(m("scan"))} (${f(m("sumScan"))}) | ${f(m("place"))} (${f(m("sumPlace"))}) | ${f(m("finish"))} |`,
    );
  }
}
const tree = (t) => `${t.files} files, ${(t.bytes / 1e6).toFixed(1)} MB`;
for (const [name, r] of Object.entries(results)) {
  out.push(
    "",
    `${name}: locks ${r.locked.join(" ")}. CARGO_HOME/registry after \`cargo fetch\` cold: ${tree(r.cargoHomeTree)}; after cargo unpacked the gateway's registry: ${tree(r.unpackTree)}.`,
  );
}
process.stdout.write(`${out.join("\n")}\n`);
if (JSON_OUT !== null) writeFileSync(JSON_OUT, JSON.stringify({ runs: RUNS, loadBefore, loadAfter, results }, null, 2));
