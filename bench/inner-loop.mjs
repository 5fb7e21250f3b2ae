#!/usr/bin/env node
// Issue 21, the inner loop: `kiln cargo test` (the real CLI, a child process, over a real TCP
// socket) against bare `cargo test` on the same crate, cold, warm (an unchanged re-run) and after
// a one-file edit, in one run, interleaved; then where a no-op re-run's fixed cost goes, phase by
// phase, from the CLI's start to its exit.
//
//   npm run build && node bench/inner-loop.mjs [--runs N] [--warm N] [--crates semver,serde_json,regex,workspace] [--json FILE]
//
// kiln runs in this process, wired as `kiln-server serve` wires it (openStorage on a fresh data
// dir, a LocalBlobStore, buildApp listening on 127.0.0.1, the embedded local host with the
// sandbox executor under a cgroup parent of its own, see end-to-end.mjs). The CLI is
// `node packages/cli/dist/src/main.js cargo test --json` in a git work tree of the crate, as a
// developer runs it. Must run as root (the sandbox executor requires it).
import { execFileSync, spawn } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdirSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { machineCpuTicks } from "../scripts/machine-cpu.mjs";
import { dist, requireBuilt, root } from "./support/built-packages.mjs";
import { commitWorkTree } from "./support/git-work-tree.mjs";
import { startInProcessKiln } from "./support/in-process-kiln.mjs";
import { describeMachine } from "./support/machine.mjs";
import { option, positiveIntegerOption } from "./support/options.mjs";
import { fmt, log, table } from "./support/output.mjs";
import { sandboxTrueSeconds } from "./support/sandbox-true.mjs";
import { removeScratch, temp } from "./support/scratch.mjs";
import { median as middle } from "./support/statistics.mjs";
import { timelineTable } from "./support/timeline-table.mjs";

/** The CLI measured: the build's, or another build's entry (KILN_BENCH_CLI, e.g. an earlier commit's). */
const KILN_BIN = process.env.KILN_BENCH_CLI ?? join(root, "packages", "cli", "dist", "bundle", "main.js");
requireBuilt(dist("src/build-app.js"), dist("src/testing/debian-crates.js"), KILN_BIN);
const { DEBIAN_REGISTRY, DEBIAN_SOURCE_CONFIG, debianCrateInstalled, directCargoTest, directTestCounts } = await import(
  dist("src/testing/debian-crates.js")
);

// ---------------------------------------------------------------------------------------------
// Options

const RUNS = positiveIntegerOption("runs", "3");
/** Unchanged re-runs per round (each is one warm sample, bare and kiln alike). */
const WARM = positiveIntegerOption("warm", "2");
const CRATE_NAMES = option("crates", "semver,serde_json,regex,workspace").split(",");
const JSON_OUT = option("json", null);
/**
 * One CPU group for everything the bench measures. Bare cargo runs in the bench's session
 * autogroup and kiln's sandbox in a cgroup of its own; on a loaded machine the kernel shares
 * CPU between such groups, not between processes, so the two columns would get different
 * shares of the same machine. On a cgroup v1 cpu hierarchy the bench moves itself (and with it
 * bare cargo, the CLI and the server) into `kiln-bench-<pid>`, and the sandboxes nest under it
 * (the executor puts its parent under its own process's cgroup on v1): both columns then
 * compete with the rest of the machine as one group of the default weight, and within it kiln's
 * own processes share with its sandbox as on a host that runs only kiln. Elsewhere the
 * sandboxes get a parent of their own, as in end-to-end.mjs.
 */
const CPU_HIERARCHY = "/sys/fs/cgroup/cpu";
const BENCH_CPU_GROUP = join(CPU_HIERARCHY, `kiln-bench-${process.pid}`);
const CGROUP_PARENT = `kiln-bench-${process.pid}-sandboxes`;
const ownCpuGroup = existsSync(join(CPU_HIERARCHY, "cpu.shares"));
if (ownCpuGroup) {
  mkdirSync(BENCH_CPU_GROUP);
  writeFileSync(join(BENCH_CPU_GROUP, "cgroup.procs"), String(process.pid));
  process.on("exit", leaveCpuGroup);
}
/** Back to the root group; the bench's groups removed (each is empty by then). */
function leaveCpuGroup() {
  if (!ownCpuGroup) return;
  writeFileSync(join(CPU_HIERARCHY, "cgroup.procs"), String(process.pid));
  for (const dir of [join(BENCH_CPU_GROUP, CGROUP_PARENT), BENCH_CPU_GROUP])
    try {
      rmdirSync(dir);
    } catch {
      // not made, or not empty: left for the operator to see
    }
}
const SIZE = "kiln2-cpu";
const VCPUS = 2;
/** What kiln injects into a dev-profile job of kiln2-cpu (docs/build-settings.md); bare cargo gets the same. */
const INJECTED = { CARGO_BUILD_JOBS: String(VCPUS), CARGO_PROFILE_DEV_DEBUG: "line-tables-only" };
/** Issue 21's goal: warm and one-file-edit runs within 1.1× bare cargo + 0.3 s. */
const GOAL = { factor: 1.1, seconds: 0.3 };
const EDIT = "\n// kiln bench: a one-file edit\n";

/** Crates from Debian's sources: one directory each, or a workspace of several. */
const registryCrate = (dirName, editPath = "src/lib.rs") => ({
  packages: [`${dirName}`],
  editPath,
  lay: (dir) => copyCrate(join(DEBIAN_REGISTRY, dirName), dir),
});
/**
 * The 7-crate workspace: pest's four crates (a proc-macro chain: pest_derive → pest_generator →
 * pest_meta → pest), unic-ucd-version → unic-common and unic-char-range, each Debian's source
 * as a member, joined by a [patch.crates-io] so members use each other, not the registry copies.
 */
const WORKSPACE_MEMBERS = [
  ["pest", "pest-2.5.2"],
  ["pest_derive", "pest_derive-2.5.2"],
  ["pest_generator", "pest_generator-2.5.2"],
  ["pest_meta", "pest_meta-2.5.2"],
  ["unic-char-range", "unic-char-range-0.9.0"],
  ["unic-common", "unic-common-0.9.0"],
  ["unic-ucd-version", "unic-ucd-version-0.9.0"],
];
const CRATES = {
  semver: { label: "semver 1.0.14", ...registryCrate("semver-1.0.14") },
  serde_json: { label: "serde_json 1.0.87", ...registryCrate("serde_json-1.0.87") },
  regex: { label: "regex 1.7.1", ...registryCrate("regex-1.7.1") },
  workspace: {
    label: "7-crate workspace (pest, unic)",
    packages: WORKSPACE_MEMBERS.map(([, d]) => d),
    editPath: "pest_meta/src/lib.rs",
    lay: (dir) => {
      for (const [member, dirName] of WORKSPACE_MEMBERS) copyCrate(join(DEBIAN_REGISTRY, dirName), join(dir, member));
      const members = WORKSPACE_MEMBERS.map(([m]) => `"${m}"`).join(", ");
      const patches = WORKSPACE_MEMBERS.map(([m]) => `${m} = { path = "${m}" }`).join("\n");
      writeFileSync(
        join(dir, "Cargo.toml"),
        `[workspace]\nmembers = [${members}]\nresolver = "2"\n\n[patch.crates-io]\n${patches}\n`,
      );
    },
  },
};
for (const name of CRATE_NAMES) {
  if (!(name in CRATES)) throw new Error(`unknown crate ${name}`);
  for (const dirName of CRATES[name].packages) {
    const [, crate, version] = /^(.*)-(\d[^-]*)$/.exec(dirName) ?? [];
    if (!debianCrateInstalled(crate, version))
      throw new Error(`${dirName} is not installed under ${DEBIAN_REGISTRY} (see bench/README.md, inner-loop.mjs)`);
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** The median of the samples that are numbers (NaN when none is). */
const median = (xs) => middle(xs.filter((x) => typeof x === "number" && !Number.isNaN(x)));
/** Wall-clock milliseconds with sub-millisecond precision, on the same clock as Date.now(). */
const nowMs = () => performance.timeOrigin + performance.now();

function copyCrate(from, to) {
  cpSync(from, to, { recursive: true });
  rmSync(join(to, ".cargo-checksum.json"), { force: true });
}

/** A crate's source as a developer has it: a git work tree with one commit, crates-io from Debian. */
function layOut(crate) {
  const dir = temp("kiln-inner-src-");
  crate.lay(dir);
  mkdirSync(join(dir, ".cargo"), { recursive: true });
  writeFileSync(join(dir, ".cargo", "config.toml"), DEBIAN_SOURCE_CONFIG);
  writeFileSync(join(dir, ".gitignore"), "/target\n");
  commitWorkTree(dir, "the crate as Debian ships it");
  return dir;
}

/** CPU ticks of the whole machine (busy and idle): what other processes took while the bench ran. */
const cpuTicks = machineCpuTicks;

async function bare(workspace, targetDir) {
  const run = await directCargoTest(workspace, { targetDir, jobs: VCPUS, environment: INJECTED });
  if (run.exitCode !== 0) throw new Error(`bare cargo test failed:\n${run.output.slice(-3000)}`);
  return {
    seconds: run.seconds,
    tests: directTestCounts(run.output),
    compileSeconds: Number(/Finished `test` profile .* in ([\d.]+)s/.exec(run.output)?.[1] ?? Number.NaN),
    compiled: [...run.output.matchAll(/^\s+Compiling (\S+)/gm)].map((m) => m[1]),
  };
}

// ---------------------------------------------------------------------------------------------
// kiln, wired like `kiln-server serve`, listening on loopback

async function startKiln() {
  // Every request the CLI makes, with when it arrived and when its response ended (a log
  // stream's response ends when the stream does): the CLI's side of the timeline.
  const requests = [];
  // The job notifications stay buildApp's own and the local host has none: as measured so far.
  const kiln = await startInProcessKiln({
    dataDir: temp("kiln-inner-data-"),
    cgroupParentName: CGROUP_PARENT,
    notifications: false,
    publicOrigin: "http://127.0.0.1",
    listen: { host: "127.0.0.1", port: 0 },
    onApp: (app) => {
      app.addHook("onRequest", async (request) => {
        request.benchStarted = nowMs();
      });
      app.addHook("onResponse", async (request, reply) => {
        requests.push({
          operation: request.routeOptions.config?.operation?.id ?? request.url,
          url: request.url,
          status: reply.statusCode,
          start: request.benchStarted,
          end: nowMs(),
        });
      });
      // A hijacked reply (the log stream) never reaches onResponse: its socket's close ends it.
      app.addHook("onRequest", async (request, reply) => {
        if (!request.url.split("?")[0].endsWith("/logs/stream")) return;
        reply.raw.once("finish", () =>
          requests.push({
            operation: "jobs.logs_stream",
            url: request.url,
            status: 200,
            start: request.benchStarted,
            end: nowMs(),
          }),
        );
      });
    },
  });
  const { address, member, get, onboard } = kiln;
  const cacheHome = temp("kiln-inner-cache-");
  const configHome = temp("kiln-inner-config-");

  /** `kiln cargo test --json` in `dir`; returns its wall time, the job's evidence and the timeline. */
  async function run(dir, repository) {
    const first = requests.length;
    const env = { ...process.env, KILN_ENDPOINT: address, KILN_TOKEN: member.token };
    Object.assign(env, { XDG_CACHE_HOME: cacheHome, XDG_CONFIG_HOME: configHome });
    const spawned = nowMs();
    const nodeArgs = (process.env.KILN_BENCH_CLI_NODE_ARGS ?? "").split(" ").filter((a) => a !== "");
    const child = spawn(
      process.execPath,
      [...nodeArgs, KILN_BIN, "cargo", "test", "--repository", repository, "--json"],
      {
        cwd: dir,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    let stderr = "";
    let resultAt = null;
    child.stdout.setEncoding("utf8").on("data", (c) => {
      stdout += c;
      if (resultAt === null && stdout.includes('"type":"result"')) resultAt = nowMs();
    });
    child.stderr.setEncoding("utf8").on("data", (c) => {
      stderr += c;
    });
    const code = await new Promise((resolve, reject) => {
      child.once("error", reject);
      child.once("close", resolve);
    });
    const exited = nowMs();
    const lines = stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l));
    const result = lines.find((l) => l.type === "result");
    if (code !== 0 || result?.status !== "passed")
      throw new Error(`kiln cargo test exited ${code}: ${stderr.slice(-2000)}\n${stdout.slice(-2000)}`);
    // The CLI's own requests only (the bench's reads below go through the same hooks).
    const mine = requests.slice(first).filter((r) => r.start >= spawned && r.end <= exited);
    const id = result.job;
    const job = await get(`/api/jobs/${id}`);
    const evidence = await get(`/api/jobs/${id}/evidence`);
    const logText = (await get(`/api/jobs/${id}/logs?limit=1000`)).records.map((r) => r.text).join("\n");
    return {
      seconds: (exited - spawned) / 1000,
      job: id,
      cache: evidence.report.caches[0] ?? null,
      compiled: evidence.report.crates
        .filter((c) => c.outcome === "compiled")
        .map((c) => c.name ?? c.crate ?? c.package_id),
      cpuSeconds: evidence.report.units?.[0]?.cpu_seconds ?? null,
      compileSeconds: Number(/Finished `test` profile .* in ([\d.]+)s/.exec(logText)?.[1] ?? Number.NaN),
      tests: result.tests,
      timeline: timelineOf({ spawned, exited, resultAt, requests: mine, job, evidence }),
      trace: { spawned, exited, requests: mine, transitions: job.transitions, phases: evidence.report.phases },
    };
  }

  return { run, onboard, stop: kiln.stop };
}

/**
 * The fixed-cost timeline of one `kiln cargo test`: consecutive spans from the CLI's spawn to its
 * exit (ms). Marks come from the server's record of the CLI's requests, the job's transitions and
 * its attempt's phases; a span whose marks are missing counts 0.
 */
function timelineOf({ spawned, exited, resultAt, requests, job, evidence }) {
  const ms = (iso) => (iso === null || iso === undefined ? null : new Date(iso).getTime());
  const firstOf = (op) => requests.find((r) => r.operation === op) ?? null;
  const lastOf = (op) => requests.filter((r) => r.operation === op).at(-1) ?? null;
  const phase = (name) => evidence.report.phases.find((p) => p.name === name) ?? null;
  const phaseStart = (name) => ms(phase(name)?.started_at);
  const phaseEnd = (name) => {
    const p = phase(name);
    return p === null ? null : ms(p.started_at) + p.duration_ms;
  };
  const at = (to) => ms(job.transitions.find((t) => t.to === to)?.at);
  const firstRequest = requests[0]?.start ?? null;
  const submit = firstOf("jobs.submit");
  const stream = lastOf("jobs.logs_stream");
  const lastResponse = requests.at(-1)?.end ?? null;
  const marks = [
    ["CLI start → first request (node, capture, layout)", spawned, firstRequest],
    ["sources.capabilities", firstRequest, firstOf("sources.capabilities")?.end],
    ["sources.reserve", firstOf("sources.capabilities")?.end, lastOf("sources.reserve")?.end],
    ["parts sent (chunk.put)", lastOf("sources.reserve")?.end, lastOf("sources.complete")?.start],
    ["sources.complete", lastOf("sources.complete")?.start, lastOf("sources.complete")?.end],
    ["jobs.submit", lastOf("sources.complete")?.end, submit?.end],
    ["submitted → running (claim)", submit?.end, at("running")],
    ["running → provision", at("running"), phaseStart("provision")],
    ["provision", phaseStart("provision"), phaseEnd("provision")],
    ["toolchain", phaseEnd("provision"), phaseStart("restore")],
    ["restore", phaseStart("restore"), phaseEnd("restore")],
    ["fetch + plan", phaseEnd("restore"), phaseStart("test")],
    ["test (sandbox + cargo)", phaseStart("test"), phaseEnd("test")],
    ["publish + save", phaseEnd("test"), phaseEnd("save") ?? phaseEnd("test")],
    ["report (→ terminal)", phaseEnd("save") ?? phaseEnd("test"), at(job.status)],
    ["terminal → log stream ends", at(job.status), stream?.end],
    ["final reads (jobs.get, evidence)", stream?.end, lastResponse],
    ["→ result printed", lastResponse, resultAt],
    ["→ CLI exit", resultAt, exited],
  ];
  const out = {};
  for (const [name, a, b] of marks)
    out[name] = a === null || a === undefined || b === null || b === undefined ? 0 : b - a;
  out["total (CLI spawn → exit)"] = exited - spawned;
  return out;
}

/** Node's own start, and the CLI's without a request (`kiln cargo --help` loads what `kiln cargo` loads). */
async function startCosts(runs) {
  const node = [];
  const cli = [];
  for (let i = 0; i < runs; i++) {
    for (const [samples, args] of [
      [node, ["-e", "0"]],
      [cli, [KILN_BIN, "cargo", "--help"]],
    ]) {
      const started = nowMs();
      execFileSync(process.execPath, args, { stdio: "ignore" });
      samples.push((nowMs() - started) / 1000);
    }
  }
  return { node, cli };
}

// ---------------------------------------------------------------------------------------------
// The run

const machine = { ...describeMachine(), load: [loadavg()[0]] };
const ticksBefore = cpuTicks();
log(
  `bench: ${machine.cpus} CPUs (${machine.cpuModel}), ${machine.cargo}, node ${machine.node}, load ${fmt(machine.load[0])}`,
);

const kiln = await startKiln();
const results = {};
try {
  log("bench: warm-up job (not measured)");
  {
    const dir = layOut(CRATES.semver);
    await kiln.run(dir, await kiln.onboard("bench/warmup"));
  }
  for (const name of CRATE_NAMES) {
    const crate = CRATES[name];
    const r = {
      label: crate.label,
      bareCold: [],
      bareWarm: [],
      bareEdit: [],
      kilnCold: [],
      kilnWarm: [],
      kilnEdit: [],
    };
    results[name] = r;
    for (let i = 1; i <= RUNS; i++) {
      // Interleaved: bare then kiln for each mode, so load drift touches both columns alike.
      const bareDir = layOut(crate);
      const kilnDir = layOut(crate);
      const targetDir = temp("kiln-inner-target-");
      const repository = await kiln.onboard(`bench/${name}-${i}`);
      const step = async (mode, edit) => {
        if (edit) {
          // The same one-file edit on both sides: bytes and mtime change.
          appendFileSync(join(bareDir, crate.editPath), EDIT);
          appendFileSync(join(kilnDir, crate.editPath), EDIT);
        }
        const b = await bare(bareDir, targetDir);
        const k = await kiln.run(kilnDir, repository);
        const expected = mode === "cold" ? "cold" : "warm";
        if (k.cache?.outcome !== expected)
          throw new Error(`kiln's ${mode} run was not ${expected}: ${JSON.stringify(k.cache)}`);
        const bareTotal = [...b.tests.values()].reduce((s, c) => s + c.passed + c.failed, 0);
        const kilnTotal = k.tests.passed + k.tests.failed;
        if (bareTotal !== kilnTotal) throw new Error(`${name} ${mode}: bare ran ${bareTotal} tests, kiln ${kilnTotal}`);
        r[`bare${mode[0].toUpperCase()}${mode.slice(1)}`].push(b);
        r[`kiln${mode[0].toUpperCase()}${mode.slice(1)}`].push(k);
        log(`bench: ${name} ${i}/${RUNS} ${mode}: bare ${fmt(b.seconds)} s, kiln ${fmt(k.seconds)} s`);
        if (process.env.KILN_BENCH_TRACE)
          log(
            `  bare compiled ${b.compiled.join(",")} in ${b.compileSeconds} s; kiln compiled ${k.compiled.join(",")} in ${k.compileSeconds} s, cgroup CPU ${k.cpuSeconds} s`,
          );
        if (process.env.KILN_BENCH_TRACE)
          log(
            `  ${Object.entries(k.timeline)
              .filter(([, v]) => v !== 0)
              .map(([span, v]) => `${span} ${fmt(v, 0)}`)
              .join(" | ")}`,
          );
      };
      await step("cold", false);
      for (let w = 0; w < WARM; w++) await step("warm", false);
      await step("edit", true);
      machine.load.push(loadavg()[0]);
    }
  }
} finally {
  await kiln.stop();
}
log("bench: sandbox fixed cost, CLI start");
// The sandbox executor's fixed cost: `true` on a warm target dir, as a lineage's next attempt
// finds it (the first, unmeasured run makes the target disk).
const fixed = await sandboxTrueSeconds({
  runs: 5,
  vcpus: VCPUS,
  cgroupParentName: CGROUP_PARENT,
  scratchPrefix: "kiln-inner-true-",
  warmTarget: true,
});
const starts = await startCosts(9);
const ticksAfter = cpuTicks();
machine.load.push(loadavg()[0]);
machine.cpuBusyShare =
  (ticksAfter.busy - ticksBefore.busy) / (ticksAfter.busy - ticksBefore.busy + ticksAfter.idle - ticksBefore.idle);
removeScratch();

// ---------------------------------------------------------------------------------------------
// Report

const sec = (xs) => median(xs.map((x) => x.seconds));
const rows = [];
const verdicts = [];
for (const [name, r] of Object.entries(results)) {
  for (const mode of ["cold", "warm", "edit"]) {
    const key = `${mode[0].toUpperCase()}${mode.slice(1)}`;
    const b = sec(r[`bare${key}`]);
    const k = sec(r[`kiln${key}`]);
    const limit = mode === "cold" ? null : b * GOAL.factor + GOAL.seconds;
    const pass = limit === null ? null : k <= limit;
    verdicts.push({ crate: name, mode, bare: b, kiln: k, limit, pass });
    rows.push([
      r.label,
      mode,
      `${fmt(b)} s`,
      `${fmt(k)} s`,
      `${fmt(k / b)}×`,
      `${k - b >= 0 ? "+" : ""}${fmt(k - b)} s`,
      limit === null ? "–" : `${fmt(limit)} s`,
      pass === null ? "–" : pass ? "pass" : "**miss**",
    ]);
  }
}
const loads = machine.load.map((l) => fmt(l, 1)).join(", ");
const out = [
  `machine: ${machine.cpus} CPUs (${machine.cpuModel}), ${machine.memoryGiB} GiB; ${machine.cargo}; node ${machine.node}`,
  `date: ${machine.date}; command: node bench/inner-loop.mjs ${process.argv.slice(2).join(" ")}; rounds: ${RUNS}, warm re-runs per round: ${WARM}; kiln size ${SIZE}`,
  `1-minute load average (start, after each round, end): ${loads}; machine busy ${fmt(machine.cpuBusyShare * 100, 0)} % of the run; ${ownCpuGroup ? `bare cargo, the CLI, the server and the sandboxes in one CPU group (${BENCH_CPU_GROUP})` : "the sandboxes in a CPU group of their own"}`,
  "",
  table(["crate", "run", "bare cargo", "kiln cargo", "kiln/bare", "overhead", "goal ≤ 1.1×bare + 0.3 s", "goal"], rows),
  "",
  "Fixed-cost timeline of `kiln cargo test` (consecutive spans from the CLI's spawn to its exit):",
  "",
  timelineTable(results, median),
  "",
  `sandbox running \`true\` (median of ${fixed.length}): ${fmt(median(fixed), 3)} s; \`node -e 0\`: ${fmt(median(starts.node), 3)} s; \`kiln cargo --help\` (node and the modules \`kiln cargo\` loads): ${fmt(median(starts.cli), 3)} s (medians of ${starts.cli.length})`,
  `CLI: ${KILN_BIN}`,
];
process.stdout.write(`${out.join("\n")}\n`);
if (JSON_OUT) {
  const plain = Object.fromEntries(
    Object.entries(results).map(([name, r]) => [
      name,
      Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Array.isArray(v) ? v.map(({ tests, ...x }) => x) : v])),
    ]),
  );
  writeFileSync(
    JSON_OUT,
    JSON.stringify({ machine, cli: KILN_BIN, goal: GOAL, verdicts, fixed, starts, results: plain }, null, 2),
  );
}
