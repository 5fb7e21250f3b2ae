#!/usr/bin/env node
// How kiln chose its injected build settings: cold `cargo build` and `cargo test` of real crates from Debian's
// sources with cargo's defaults against the same with the setting, in the same run,
// interleaved, CARGO_BUILD_JOBS=2 throughout (what kiln2-cpu gets). Reports wall seconds and
// the target dir's bytes.
//
//   npm run build && node bench/build-settings.mjs [--runs N] [--crates semver,regex] [--operations build,test]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { dist } from "./support/built-packages.mjs";
import { option } from "./support/options.mjs";
import { log } from "./support/output.mjs";
import { upperMedian as median } from "./support/statistics.mjs";

const { debianCrate, directCargoTest, materialize } = await import(dist("src/testing/debian-crates.js"));

const RUNS = Number(option("runs", "3"));
const CRATES = { semver: ["semver", "1.0.14"], regex: ["regex", "1.7.1"] };
const names = option("crates", "semver,regex").split(",");
const operations = option("operations", "build,test").split(",");

/** A cold `cargo build` the way directCargoTest runs `cargo test` (offline, fresh CARGO_HOME). */
function directCargoBuild(dir, { targetDir, jobs, environment }) {
  const home = mkdtempSync(join(tmpdir(), "kiln-settings-home-"));
  const started = process.hrtime.bigint();
  const run = spawnSync("cargo", ["build", "--offline"], {
    cwd: dir,
    encoding: "utf8",
    env: {
      ...process.env,
      CARGO_HOME: home,
      CARGO_TARGET_DIR: targetDir,
      CARGO_NET_OFFLINE: "true",
      CARGO_BUILD_JOBS: String(jobs),
      CARGO_TERM_COLOR: "never",
      ...environment,
    },
  });
  rmSync(home, { recursive: true, force: true });
  return {
    exitCode: run.status,
    output: `${run.stdout}${run.stderr}`,
    seconds: Number(process.hrtime.bigint() - started) / 1e9,
  };
}
const SETTINGS = {
  "cargo defaults": {},
  "profile.dev.debug = line-tables-only": { CARGO_PROFILE_DEV_DEBUG: "line-tables-only" },
};

const rows = [];
const loadBefore = loadavg()[0];
for (const name of names)
  for (const operation of operations) {
    const [crate, version] = CRATES[name];
    const files = debianCrate(crate, version);
    const samples = Object.fromEntries(Object.keys(SETTINGS).map((k) => [k, { seconds: [], bytes: [] }]));
    for (let i = 0; i < RUNS; i++) {
      for (const [label, environment] of Object.entries(SETTINGS)) {
        const workspace = materialize(files, mkdtempSync(join(tmpdir(), "kiln-settings-src-")));
        const targetDir = mkdtempSync(join(tmpdir(), "kiln-settings-target-"));
        const run =
          operation === "test"
            ? await directCargoTest(workspace, { targetDir, jobs: 2, environment })
            : directCargoBuild(workspace, { targetDir, jobs: 2, environment });
        if (run.exitCode !== 0) throw new Error(`${name} (${label}) failed:\n${run.output.slice(-2000)}`);
        const bytes = Number(execFileSync("du", ["-sb", targetDir], { encoding: "utf8" }).split("\t")[0]);
        samples[label].seconds.push(run.seconds);
        samples[label].bytes.push(bytes);
        log(
          `settings: ${name} run ${i + 1}/${RUNS} ${label}: ${run.seconds.toFixed(2)} s, ${(bytes / 1e6).toFixed(0)} MB`,
        );
        rmSync(workspace, { recursive: true, force: true });
        rmSync(targetDir, { recursive: true, force: true });
      }
    }
    const base = samples["cargo defaults"];
    for (const [label, s] of Object.entries(samples)) {
      rows.push(
        `| ${crate} ${version} | cargo ${operation} | ${label} | ${median(s.seconds).toFixed(2)} s | ${(median(s.seconds) / median(base.seconds)).toFixed(2)}× | ${(median(s.bytes) / 1e6).toFixed(0)} MB | ${(median(s.bytes) / median(base.bytes)).toFixed(2)}× |`,
      );
    }
  }
process.stdout.write(
  [
    `machine: ${cpus().length} CPUs (${cpus()[0]?.model}); ${execFileSync("cargo", ["--version"], { encoding: "utf8" }).trim()}; runs ${RUNS}; load ${loadBefore.toFixed(1)} before, ${loadavg()[0].toFixed(1)} after`,
    "",
    "| crate | operation | settings | cold wall time (median) | vs defaults | target dir | vs defaults |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
    "",
  ].join("\n"),
);
