#!/usr/bin/env node
// What a microVM costs next to the sandbox (docs/isolation.md, docs/benchmarks.md), both measured
// in one run, interleaved, as ratios:
//
//   npm run build && node bench/microvm.mjs [--runs N] [--accel tcg|kvm] [--json FILE]
//
// 1. boot to agent-ready: from QEMU's start to the guest agent's `ready` (its kernel booted, the
//    modules loaded, the request read, the disks mounted), as the executor measures it, and the
//    whole fixed cost of an attempt running `true`, microVM against sandbox;
// 2. a warm run: `cargo build --offline` of the Debian-packaged semver crate once cold in each
//    isolation (its lineage's target disk then holds the build), then again — a no-op build that
//    only checks fingerprints — RUNS times in each, interleaved.
//
// On this project's machines the microVM runs under TCG (software emulation; their nested KVM
// does not boot a stock kernel): every guest instruction is translated, so its ratios say what
// emulation costs, not what a microVM costs under KVM. docs/benchmarks.md says what to expect
// with KVM and why. The guest comes from KILN_TEST_GUEST_DIR (default /var/cache/kiln-test/guest;
// `npm run bench`'s setup builds it). Must run as root.
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { dist, requireBuilt } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";

requireBuilt(dist("src/testing/debian-crates.js"));
const { admitToolchain, microvmIsolation, sandboxIsolation } = await import("@kiln/host");
const { DEBIAN_REGISTRY, debianCrate, debianCrateInstalled, materialize } = await import(
  dist("src/testing/debian-crates.js")
);

const RUNS = Number(option("runs", "3"));
const ACCEL = option("accel", "tcg");
const JSON_FILE = option("json", null);
const GUEST = process.env.KILN_TEST_GUEST_DIR ?? "/var/cache/kiln-test/guest";
const CGROUP_PARENT = `kiln-bench-${process.pid}`;

const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor((s.length - 1) / 2)];
};
const fmt = (s) => (s >= 10 ? `${s.toFixed(1)} s` : `${(s * 1000).toFixed(0)} ms`);
const samples = {};
const record = (name, value) => {
  samples[name] ??= [];
  samples[name].push(value);
};

const toolchain = await admitToolchain("stable");
const isolations = {
  microvm: microvmIsolation({ accel: ACCEL, guestDirectory: GUEST, cgroupParentName: CGROUP_PARENT }),
  sandbox: sandboxIsolation({ cgroupParentName: CGROUP_PARENT }),
};

function jobDirs(prefix) {
  const base = mkdtempSync(join(tmpdir(), prefix));
  const dirs = { base, src: join(base, "src"), target: join(base, "target"), home: join(base, "home") };
  for (const d of [dirs.src, dirs.target, dirs.home]) mkdirSync(d);
  return dirs;
}

/**
 * The crates semver's build resolves (itself and its optional serde), as a cargo directory source
 * shown read-only at /kiln/deps in both isolations: a guest sees none of the host's /usr, so the
 * sandbox's usual source (Debian's registry under /usr/share/cargo) is not there.
 */
const DEPS_MOUNT = "/kiln/deps";
const SEMVER_DEPS = ["semver-1.0.14", "serde-1.0.152"];
const DEPS_SOURCE_CONFIG = `[source.crates-io]\nreplace-with = "debian"\n\n[source.debian]\ndirectory = "${DEPS_MOUNT}"\n`;

/** Runs argv in the isolation; its wall time, and the microVM's boot as the executor measured it. */
async function attempt(kind, dirs, argv, warm, readOnlyBinds = []) {
  const started = process.hrtime.bigint();
  let stderr = "";
  const result = await isolations[kind].executor.run({
    attemptId: `bench-vm-${process.pid}-${Math.random().toString(16).slice(2, 10)}`,
    limits: { vcpus: 2, memoryBytes: 4 * 2 ** 30, pids: 1024, diskBytes: 16 * 2 ** 30 },
    workspaceDir: dirs.src,
    targetDir: dirs.target,
    homeDir: dirs.home,
    warmTarget: warm,
    toolchain,
    argv,
    workingDirectory: ".",
    environment: { CARGO_BUILD_JOBS: "2" },
    wallClockSeconds: 3600,
    network: "offline",
    readOnlyBinds,
    onOutput: (stream, chunk) => {
      if (stream === "stderr") stderr = (stderr + chunk.toString("utf8")).slice(-4000);
    },
    signal: new AbortController().signal,
  });
  const elapsed = seconds(started);
  if (result.outcome !== "exited" || result.exitCode !== 0)
    throw new Error(`${kind}: ${argv.join(" ")} failed: ${result.detail.join("; ")}\n${stderr}`);
  const boot = /boot: the guest agent was ready ([\d.]+) s after QEMU started/.exec(result.detail.join("\n"));
  return { elapsed, boot: boot === null ? null : Number(boot[1]), cpuSeconds: result.cpuSeconds };
}

// Warm-up: each executor's one-time setup (the guest's images found, the sandbox user) is not counted.
for (const kind of ["sandbox", "microvm"]) {
  const dirs = jobDirs(`kiln-bench-vm-warmup-${kind}-`);
  await attempt(kind, dirs, ["true"], false);
  rmSync(dirs.base, { recursive: true, force: true });
}

// 1. Boot to agent-ready, and the fixed cost of `true`.
for (let i = 0; i < RUNS; i++) {
  for (const kind of ["sandbox", "microvm"]) {
    const dirs = jobDirs(`kiln-bench-vm-true-${kind}-`);
    const run = await attempt(kind, dirs, ["true"], false);
    record(`true: ${kind}`, run.elapsed);
    if (run.boot !== null) record("microvm: boot to agent-ready", run.boot);
    rmSync(dirs.base, { recursive: true, force: true });
  }
}

// 2. semver: cold once in each, then warm (no-op) runs interleaved.
if (!debianCrateInstalled("semver", "1.0.14")) {
  process.stderr.write("bench: librust-semver-dev is not installed; skipping the semver runs\n");
} else {
  const crate = debianCrate("semver", "1.0.14").map((file) =>
    file.path === ".cargo/config.toml" ? { ...file, bytes: [...Buffer.from(DEPS_SOURCE_CONFIG)] } : file,
  );
  const registry = mkdtempSync(join(tmpdir(), "kiln-bench-vm-registry-"));
  chmodSync(registry, 0o755); // the job's user reads it in the sandbox
  for (const name of SEMVER_DEPS) cpSync(join(DEBIAN_REGISTRY, name), join(registry, name), { recursive: true });
  const binds = [{ source: registry, target: DEPS_MOUNT }];
  const build = ["cargo", "build", "--offline"];
  const jobs = {};
  for (const kind of ["sandbox", "microvm"]) {
    jobs[kind] = jobDirs(`kiln-bench-vm-semver-${kind}-`);
    materialize(crate, jobs[kind].src);
    const cold = await attempt(kind, jobs[kind], build, false, binds);
    record(`semver cold: ${kind}`, cold.elapsed);
    if (cold.cpuSeconds !== null) record(`semver cold cpu-seconds: ${kind}`, cold.cpuSeconds);
  }
  for (let i = 0; i < RUNS; i++) {
    for (const kind of ["sandbox", "microvm"]) {
      const warm = await attempt(kind, jobs[kind], build, true, binds);
      record(`semver warm: ${kind}`, warm.elapsed);
    }
  }
  for (const dirs of Object.values(jobs)) rmSync(dirs.base, { recursive: true, force: true });
  rmSync(registry, { recursive: true, force: true });
}

const m = (name) => median(samples[name] ?? []);
console.log(
  `microVM bench (${ACCEL === "tcg" ? "TCG: software emulation" : "KVM"}): ${RUNS} runs, ${cpus().length} CPUs, load ${loadavg()[0].toFixed(1)} at the end`,
);
for (const [name, values] of Object.entries(samples))
  console.log(`  ${name.padEnd(36)} median ${fmt(median(values))}  (${values.map(fmt).join(", ")})`);
console.log(
  `  ratios microvm/sandbox: true ${(m("true: microvm") / m("true: sandbox")).toFixed(1)}; ` +
    `semver cold ${(m("semver cold: microvm") / m("semver cold: sandbox")).toFixed(1)}; ` +
    `semver warm ${(m("semver warm: microvm") / m("semver warm: sandbox")).toFixed(1)}` +
    (ACCEL === "tcg" ? " (TCG: emulation's cost, not KVM's)" : ""),
);
if (JSON_FILE !== null) writeFileSync(JSON_FILE, JSON.stringify(samples, null, 2));
