#!/usr/bin/env node
// What issue 37's test runner costs and what its durations add up to, on regex 1.7.1 (Debian's
// source; its tests all pass): a warm `cargo test` as cargo runs it against the same with kiln's
// test runner (packages/host/src/agent/attempt/test-runner.ts: each binary timed, each test
// timed with libtest --report-time, flaky retries armed at 2), interleaved in the same run,
// CARGO_BUILD_JOBS=2. Then, from the runner's own output, the sum of the tests' measured
// durations against the test binaries' measured wall time, with libtest's default test threads
// and with one (`-- --test-threads=1`), where the two can be compared literally. And what
// libtest's two options (--report-time, --logfile) cost by themselves, the binaries run directly.
//
//   npm run build && node bench/test-timing.mjs [--runs N]
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { dist, requireBuilt, root } from "./support/built-packages.mjs";
import { describeMachine } from "./support/machine.mjs";
import { positiveIntegerOption } from "./support/options.mjs";
import { fmt, log, table } from "./support/output.mjs";
import { median } from "./support/statistics.mjs";

const RUNNER = join(root, "packages", "host", "dist", "src", "agent", "attempt", "test-runner.js");
requireBuilt(dist("src/testing/debian-crates.js"), RUNNER);
const { debianCrate, debianCrateInstalled, directCargoTest, materialize } = await import(
  dist("src/testing/debian-crates.js")
);
const { testRunnerConfig } = await import(RUNNER);

const RUNS = positiveIntegerOption("runs", "5");
if (!debianCrateInstalled("regex", "1.7.1"))
  throw new Error("apt-get install librust-regex-dev (ensure-setup's bench list)");

const dir = materialize(debianCrate("regex", "1.7.1"));
const targetDir = mkdtempSync(join(tmpdir(), "kiln-test-timing-target-"));
// The job's own /tmp in kiln, where the runner keeps its log: both modes run with it, so the
// runner's file stays out of the machine's /tmp.
const jobTmp = mkdtempSync(join(tmpdir(), "kiln-test-timing-tmp-"));
const environment = { TMPDIR: jobTmp };
const runner = ["--config", testRunnerConfig("x86_64-unknown-linux-gnu", 2, "pass")];

/** Per binary: its measured wall time and the sum and count of its tests' measured durations. */
function binaries(output) {
  const found = [];
  let open = null;
  for (const line of output.split("\n")) {
    if (line.startsWith('{"reason":"kiln-test-binary-')) {
      const marker = JSON.parse(line);
      const at = BigInt(marker.at_ns);
      if (marker.reason === "kiln-test-binary-start") {
        open = { executable: marker.executable, start: at, sumMs: 0, tests: 0 };
      } else if (open !== null) {
        found.push({ ...open, wallMs: Number(at - open.start) / 1e6 });
        open = null;
      }
      continue;
    }
    const time = open === null ? null : /^test .* \.\.\. (?:ok|FAILED) <(\d+\.\d+)s>$/.exec(line);
    if (time) {
      open.sumMs += Number(time[1]) * 1000;
      open.tests += 1;
    }
  }
  return found;
}

try {
  log("warming the target dir (cargo test --no-run) …");
  const warm = await directCargoTest(dir, { targetDir, args: ["--no-run"] });
  if (warm.exitCode !== 0) throw new Error(`cargo test --no-run failed:\n${warm.output.slice(-2000)}`);
  const loadBefore = loadavg()[0];
  const seconds = { plain: [], runner: [] };
  // libtest's own "finished in" per binary, summed: whether the binaries themselves ran slower.
  const libtestSeconds = { plain: [], runner: [] };
  const finishedIn = (output) =>
    [...output.matchAll(/^test result: .*; finished in (\d+\.\d+)s$/gm)].reduce((s, m) => s + Number(m[1]), 0);
  let lastRunnerOutput = "";
  for (let i = 0; i < RUNS; i++) {
    for (const mode of i % 2 === 0 ? ["plain", "runner"] : ["runner", "plain"]) {
      const run = await directCargoTest(dir, { targetDir, environment, args: mode === "runner" ? runner : [] });
      if (run.exitCode !== 0) throw new Error(`${mode} cargo test failed:\n${run.output.slice(-2000)}`);
      seconds[mode].push(run.seconds);
      libtestSeconds[mode].push(finishedIn(run.output));
      if (mode === "runner") lastRunnerOutput = run.output;
      log(`run ${i + 1}/${RUNS} ${mode}: ${fmt(run.seconds)} s`);
    }
  }
  // What the runner no longer does on a warm run (it keeps what it found beside each binary,
  // `<exe>.kiln-harness`): its two greps over each test binary, timed here, summed, best of 3.
  const deps = join(targetDir, "debug", "deps");
  const testBinaries = readdirSync(deps)
    .filter((f) => !f.includes(".") && statSync(join(deps, f)).mode & 0o100)
    .map((f) => join(deps, f));
  const harnessNotes = readdirSync(deps).filter((f) => f.endsWith(".kiln-harness")).length;
  const grepRounds = [];
  for (let round = 0; round < 3; round++) {
    const started = process.hrtime.bigint();
    for (const exe of testBinaries) {
      spawnSync("grep", ["-qaF", "-e", "report-time", exe]);
      spawnSync("grep", ["-qaF", "-e", "logfile", exe]);
    }
    grepRounds.push(Number(process.hrtime.bigint() - started) / 1e9);
  }
  // libtest's own share: the binaries run directly (no cargo, no runner), one after another, with
  // each option the runner adds, alone and together; rounds rotate the order of the options.
  const OPTIONS = {
    nothing: [],
    "--report-time": ["-Z", "unstable-options", "--report-time"],
    "--logfile": ["--logfile", join(jobTmp, "libtest.log")],
    "both, as the runner runs them": [
      "--logfile",
      join(jobTmp, "libtest.log"),
      "-Z",
      "unstable-options",
      "--report-time",
    ],
  };
  const optionSeconds = Object.fromEntries(Object.keys(OPTIONS).map((name) => [name, []]));
  for (let round = 0; round < RUNS; round++) {
    const names = Object.keys(OPTIONS);
    for (const name of [...names.slice(round % names.length), ...names.slice(0, round % names.length)]) {
      const started = process.hrtime.bigint();
      for (const exe of testBinaries) {
        const run = spawnSync(exe, OPTIONS[name], {
          cwd: dir,
          env: { ...process.env, RUSTC_BOOTSTRAP: "-1" },
          stdio: ["ignore", "pipe", "pipe"],
          maxBuffer: 64 * 2 ** 20,
        });
        if (run.status !== 0) throw new Error(`${exe} ${OPTIONS[name].join(" ")}: exit ${run.status}`);
      }
      optionSeconds[name].push(Number(process.hrtime.bigint() - started) / 1e9);
    }
  }
  const single = await directCargoTest(dir, { targetDir, environment, args: [...runner, "--", "--test-threads=1"] });
  if (single.exitCode !== 0) throw new Error(`cargo test -- --test-threads=1 failed:\n${single.output.slice(-2000)}`);
  const loadAfter = loadavg()[0];

  const plain = median(seconds.plain);
  const withRunner = median(seconds.runner);
  console.log(`# test-timing (regex 1.7.1, warm cargo test, ${RUNS} interleaved pairs)\n`);
  console.log(`machine: ${JSON.stringify(describeMachine())}; load average ${fmt(loadBefore)} → ${fmt(loadAfter)}\n`);
  console.log(
    table(
      ["cargo test", "median wall s", "all runs s"],
      [
        ["as cargo runs it", fmt(plain), seconds.plain.map((s) => fmt(s)).join(", ")],
        ["with kiln's test runner", fmt(withRunner), seconds.runner.map((s) => fmt(s)).join(", ")],
        ["runner's cost", `${fmt(((withRunner - plain) / plain) * 100, 1)} %`, ""],
        [
          "libtest's own time (sum of `finished in`), as cargo runs it",
          fmt(median(libtestSeconds.plain)),
          libtestSeconds.plain.map((s) => fmt(s)).join(", "),
        ],
        [
          "libtest's own time, with the runner",
          fmt(median(libtestSeconds.runner)),
          libtestSeconds.runner.map((s) => fmt(s)).join(", "),
        ],
      ],
    ),
  );
  console.log(
    `\nthe former runner's greps (two per binary) over the ${testBinaries.length} test binaries ` +
      `(${fmt(testBinaries.reduce((n, f) => n + statSync(f).size, 0) / 2 ** 20, 0)} MiB): ` +
      `${fmt(Math.min(...grepRounds), 3)} s (rounds: ${grepRounds.map((r) => fmt(r, 3)).join(", ")}); ` +
      `harness notes the runner kept beside them: ${harnessNotes}`,
  );
  const bare = median(optionSeconds.nothing);
  console.log(`\n## libtest's options: the ${testBinaries.length} binaries run directly, ${RUNS} rounds\n`);
  console.log(
    table(
      ["options", "median wall s", "cost", "all rounds s"],
      Object.entries(optionSeconds).map(([name, runs]) => [
        name,
        fmt(median(runs)),
        name === "nothing" ? "–" : `${fmt(((median(runs) - bare) / bare) * 100, 1)} %`,
        runs.map((r) => fmt(r)).join(", "),
      ]),
    ),
  );
  for (const [label, output] of [
    ["default test threads", lastRunnerOutput],
    ["--test-threads=1", single.output],
  ]) {
    const rows = binaries(output);
    const wall = rows.reduce((s, b) => s + b.wallMs, 0);
    const sum = rows.reduce((s, b) => s + b.sumMs, 0);
    const tests = rows.reduce((s, b) => s + b.tests, 0);
    console.log(`\n## ${label}: ${tests} timed tests in ${rows.length} binaries\n`);
    console.log(
      table(
        ["binary", "tests", "wall ms", "sum of durations ms", "sum / wall"],
        [
          ...rows.map((b) => [
            b.executable.split("/").at(-1),
            String(b.tests),
            fmt(b.wallMs, 0),
            fmt(b.sumMs, 0),
            fmt(b.sumMs / b.wallMs, 2),
          ]),
          ["all", String(tests), fmt(wall, 0), fmt(sum, 0), fmt(sum / wall, 2)],
        ],
      ),
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
  rmSync(targetDir, { recursive: true, force: true });
  rmSync(jobTmp, { recursive: true, force: true });
}
