#!/usr/bin/env node
// What the sandbox's disk quota, seccomp filter and overlays cost (docs/isolation.md), measured in
// one run against baselines measured in the same run, interleaved:
//
//   npm run build && node bench/sandbox-isolation.mjs [--runs N] [--json FILE] [--baseline-host DIR]
//
// --baseline-host names the built packages/host of another checkout (e.g. the commit before the
// disk quota, seccomp filter and overlays: `git worktree add /tmp/old <commit>`, then
// `npx tsc -b packages/contract packages/storage packages/host` there): its sandbox executor
// runs the same `true` and builds, interleaved, as the same-run baseline of what changed.
//
// 1. target disk, by itself: making a cold one (sparse file + mkfs.ext4) and preparing a warm
//    one (superblock read + reserve write), as prepareTargetDisk does before every attempt;
// 2. the sandbox's fixed cost: `true` in the sandbox with a cold target dir (a disk is made) and
//    with a warm one (reused), against `true` spawned bare;
// 3. a real build: `cargo build` of the Debian-packaged semver crate (offline), cold and then a
//    no-op rebuild, in the sandbox (target disk, overlays, seccomp) against bare cargo with a
//    plain target dir.
//
// Must run as root, like the sandbox executor. Prints ratios; docs/benchmarks.md records them.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { dist, requireBuilt, root } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";

const hostDist = (path) => join(root, "packages", "host", "dist", path);
requireBuilt(hostDist("src/executor/shared/target-disk.js"), dist("src/testing/debian-crates.js"));
// removeJobDirectories: also unmounts the target disks the sandbox keeps mounted (kept-target-disk.ts).
const { admitToolchain, createSandboxExecutor, removeJobDirectories } = await import("@kiln/host");
const { diskTools, prepareTargetDisk, waitUntilDetached } = await import(
  hostDist("src/executor/shared/target-disk.js")
);
const { debianCrate, debianCrateInstalled, materialize } = await import(dist("src/testing/debian-crates.js"));

const RUNS = Number(option("runs", "5"));
const JSON_FILE = option("json", null);
const QUOTA = 16 * 2 ** 30;
const OWNER = "65534:65534";
const CGROUP_PARENT = `kiln-bench-${process.pid}`;

const temp = (prefix) => mkdtempSync(join(tmpdir(), prefix));
const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor((s.length - 1) / 2)];
};
const ms = (s) => `${(s * 1000).toFixed(1)} ms`;

const samples = {};
const record = (name, value) => {
  samples[name] ??= [];
  samples[name].push(value);
};

const executor = createSandboxExecutor({ cgroupParentName: CGROUP_PARENT });
const BASELINE = option("baseline-host", null);
const baselineExecutor =
  BASELINE === null
    ? null
    : (await import(join(BASELINE, "dist", "src", "executor", "sandbox-executor.js"))).createSandboxExecutor({
        cgroupParentName: CGROUP_PARENT,
      });
const toolchain = await admitToolchain("stable");
const tools = await diskTools();

async function sandboxed(dirs, argv, warm, runner = executor) {
  const started = process.hrtime.bigint();
  const result = await runner.run({
    attemptId: `bench-iso-${process.pid}-${Math.random().toString(16).slice(2, 10)}`,
    limits: { vcpus: 2, memoryBytes: 4 * 2 ** 30, pids: 1024, diskBytes: QUOTA },
    workspaceDir: dirs.src,
    targetDir: dirs.target,
    homeDir: dirs.home,
    warmTarget: warm,
    toolchain,
    argv,
    workingDirectory: ".",
    environment: { CARGO_BUILD_JOBS: "2" },
    wallClockSeconds: 600,
    network: "offline",
    onOutput: () => {},
    signal: new AbortController().signal,
  });
  if (result.outcome !== "exited" || result.exitCode !== 0)
    throw new Error(`sandboxed ${argv.join(" ")} failed: ${result.detail.join("; ")}`);
  return seconds(started);
}

function jobDirs(prefix) {
  const base = temp(prefix);
  const dirs = { base, src: join(base, "src"), target: join(base, "target"), home: join(base, "home") };
  for (const d of [dirs.src, dirs.target, dirs.home]) mkdirSync(d);
  return dirs;
}

// Warm-up: the executor's one-time setup (sandbox user, tools, seccomp program) is not counted.
{
  const dirs = jobDirs("kiln-bench-iso-warmup-");
  await sandboxed(dirs, ["true"], false);
  await removeJobDirectories([dirs.base]);
}

for (let i = 0; i < RUNS; i++) {
  // 1. The target disk by itself.
  const diskDir = temp("kiln-bench-disk-");
  let start = process.hrtime.bigint();
  await prepareTargetDisk(tools, diskDir, QUOTA, OWNER);
  record("disk: cold (sparse file + mkfs.ext4)", seconds(start));
  start = process.hrtime.bigint();
  await prepareTargetDisk(tools, diskDir, QUOTA, OWNER);
  record("disk: warm (superblock read + reserve write)", seconds(start));
  start = process.hrtime.bigint();
  await waitUntilDetached(join(diskDir, "kiln-target.ext4"));
  record("disk: detached check (sysfs)", seconds(start));
  rmSync(diskDir, { recursive: true, force: true });

  // 2. The fixed cost.
  start = process.hrtime.bigint();
  spawnSync("true");
  record("true: bare spawn", seconds(start));
  const dirs = jobDirs("kiln-bench-iso-true-");
  record("true: sandbox, cold target disk", await sandboxed(dirs, ["true"], false));
  record("true: sandbox, warm target disk", await sandboxed(dirs, ["true"], true));
  await removeJobDirectories([dirs.base]);
  if (baselineExecutor !== null) {
    const before = jobDirs("kiln-bench-iso-before-");
    record("true: sandbox before (baseline host)", await sandboxed(before, ["true"], false, baselineExecutor));
    record("true: sandbox before, warm (baseline host)", await sandboxed(before, ["true"], true, baselineExecutor));
    await removeJobDirectories([before.base]);
  }
}

// 3. A real build, bare and sandboxed, interleaved.
const crate = debianCrateInstalled("semver", "1.0.14") ? debianCrate("semver", "1.0.14") : null;
if (crate === null) process.stderr.write("bench: librust-semver-dev is not installed; skipping builds\n");
else
  for (let i = 0; i < RUNS; i++) {
    const bare = jobDirs("kiln-bench-iso-bare-");
    materialize(crate, bare.src);
    const env = { ...process.env, CARGO_TARGET_DIR: bare.target, CARGO_HOME: bare.home, CARGO_BUILD_JOBS: "2" };
    let start = process.hrtime.bigint();
    execFileSync(join(toolchain.path, "bin", "cargo"), ["build", "--offline"], { cwd: bare.src, env, stdio: "ignore" });
    record("semver build: bare, cold", seconds(start));
    start = process.hrtime.bigint();
    execFileSync(join(toolchain.path, "bin", "cargo"), ["build", "--offline"], { cwd: bare.src, env, stdio: "ignore" });
    record("semver build: bare, no-op", seconds(start));
    rmSync(bare.base, { recursive: true, force: true });

    const boxed = jobDirs("kiln-bench-iso-boxed-");
    materialize(crate, boxed.src);
    record("semver build: sandbox, cold", await sandboxed(boxed, ["cargo", "build", "--offline"], false));
    record("semver build: sandbox, no-op", await sandboxed(boxed, ["cargo", "build", "--offline"], true));
    await removeJobDirectories([boxed.base]);
    if (baselineExecutor !== null) {
      const before = jobDirs("kiln-bench-iso-before-");
      materialize(crate, before.src);
      const build = ["cargo", "build", "--offline"];
      record(
        "semver build: sandbox before, cold (baseline host)",
        await sandboxed(before, build, false, baselineExecutor),
      );
      record(
        "semver build: sandbox before, no-op (baseline host)",
        await sandboxed(before, build, true, baselineExecutor),
      );
      await removeJobDirectories([before.base]);
    }
  }

const m = (name) => median(samples[name] ?? []);
console.log(`sandbox isolation bench: ${RUNS} runs, ${cpus().length} CPUs, load ${loadavg()[0].toFixed(1)} at the end`);
for (const [name, values] of Object.entries(samples))
  console.log(`  ${name.padEnd(46)} median ${ms(median(values))}  (${values.map(ms).join(", ")})`);
console.log(
  `  ratios: sandbox true cold/warm ${(m("true: sandbox, cold target disk") / m("true: sandbox, warm target disk")).toFixed(2)}; ` +
    `semver cold sandbox/bare ${(m("semver build: sandbox, cold") / m("semver build: bare, cold")).toFixed(2)}; ` +
    `no-op sandbox/bare ${(m("semver build: sandbox, no-op") / m("semver build: bare, no-op")).toFixed(2)}`,
);
if (baselineExecutor !== null)
  console.log(
    `  against the baseline host: true warm ${(m("true: sandbox, warm target disk") / m("true: sandbox before, warm (baseline host)")).toFixed(2)}, ` +
      `true cold ${(m("true: sandbox, cold target disk") / m("true: sandbox before (baseline host)")).toFixed(2)}, ` +
      `semver cold ${(m("semver build: sandbox, cold") / m("semver build: sandbox before, cold (baseline host)")).toFixed(2)}, ` +
      `no-op ${(m("semver build: sandbox, no-op") / m("semver build: sandbox before, no-op (baseline host)")).toFixed(2)}`,
  );
if (JSON_FILE !== null) writeFileSync(JSON_FILE, JSON.stringify(samples, null, 2));
