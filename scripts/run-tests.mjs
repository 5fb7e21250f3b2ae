#!/usr/bin/env node
// `npm test`: lint and format check, the fast reliability trials (scripts/run-reliability.mjs
// --gate), the `kiln` CLI's tests with the bundle on the machine's own node when that is not the
// runtime (alsoOnMachineNode below), then every package's tests under node's test runner against
// real SQLite and a throwaway PostgreSQL 15 cluster started here and stopped afterwards, all on the
// project's Node.js runtime (scripts/project-runtime.mjs): the tests and every kiln-server and
// kiln-host they start. The runner's closing summary is what CI reads.
//
//   node scripts/run-tests.mjs                  # the full gate (`npm test`)
//   node scripts/run-tests.mjs --fast           # the inner gate (`npm run test:fast`): lint and
//                                               # every unmarked file (scripts/test-timings.mjs)
//
// The marked files (sandbox, process, browser: scripts/test-timings.mjs) run CONCURRENCY at a time
// under node's test runner, a process each; the unmarked (in-process) files in SHARDS shard
// processes beside them; the CLI's second pass in a process of its own beside both.
//   node scripts/run-tests.mjs jobs- storage/   # the files whose path contains a substring
//
// Every file's wall time goes to .kiln-test/test-timings.json (the in-process files' times in
// their shards to fast-timings.json); the next run starts the slowest files first and deals the
// shards by them, and each run names its ten slowest at the end.
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { basename, dirname, join, relative, sep } from "node:path";
import { Transform } from "node:stream";
import { finished } from "node:stream/promises";
import { run } from "node:test";
import { spec } from "node:test/reporters";
import { fileURLToPath } from "node:url";
import { machineCpuTicks } from "./machine-cpu.mjs";
import { startThrowawayCluster } from "./postgres-cluster.mjs";
import { projectRuntime } from "./project-runtime.mjs";
import {
  costliestLines,
  markOf,
  readFileCpu,
  readTimings,
  recordTimings,
  slowestFirst,
  slowestLines,
  sourceOf,
} from "./test-timings.mjs";

/** Thirty minutes: a bound on one test that hangs, never a measure of speed. */
const TEST_TIMEOUT_MS = 30 * 60 * 1000;
/**
 * The marked files (sandbox, process, browser) at once in the full gate, beside the in-process
 * shards and the CLI's second pass: one more than the 2 cores where the gate runs, as the process
 * files spend much of their time waiting on the processes they start.
 */
const CONCURRENCY = 3;
/**
 * The processes the in-process files run in (both gates), each running its share of them in one
 * process (scripts/run-test-shard.mjs): more than the cores, as those files spend much of their
 * time waiting on PostgreSQL and timers, which another shard's tests fill.
 */
const SHARDS = 12;

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const fast = args.includes("--fast");
const only = args.filter((arg) => !arg.startsWith("--"));
const timingsFile = join(root, ".kiln-test", "test-timings.json");
/** The inner gate's files' times in their shards (runShards), which deal its files. */
const fastTimingsFile = join(root, ".kiln-test", "fast-timings.json");
const runtime = projectRuntime(root);

// The test runner starts each file on the node that runs this script: started on another (the
// machine's own, `node scripts/run-tests.mjs`), this script runs itself again on the runtime.
if (realpathSync(process.execPath) !== realpathSync(runtime.node)) {
  const again = spawnSync(runtime.node, [fileURLToPath(import.meta.url), ...args], { stdio: "inherit" });
  process.exit(again.status ?? 1);
}

function allTestFiles() {
  const files = [];
  for (const pkg of readdirSync(join(root, "packages"))) {
    const dir = join(root, "packages", pkg, "dist", "test");
    // A package with tests that were not built would silently run none of them.
    if (existsSync(join(root, "packages", pkg, "test")) && !existsSync(dir)) {
      process.stderr.write(`npm test: packages/${pkg} has tests but no build of them (dist/test missing)\n`);
      process.exit(1);
    }
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir)) {
      // A build left behind by a test file since renamed or removed is not a test any more.
      const source = join(root, "packages", pkg, "test", f.replace(/\.js$/, ".ts"));
      if (f.endsWith(".test.js") && existsSync(source)) files.push(join(dir, f));
    }
  }
  return files;
}

const everyFile = allTestFiles();
const nameOf = (file) => sourceOf(root, file);
/**
 * The times a run without its own (a fresh clone: every CI run) orders and deals the files by: a
 * full gate's, committed in scripts/test-timings-seed/ (refreshed by copying .kiln-test's two
 * files there after a full run). Without them a fresh clone started the files in name order, and
 * the slowest ones late.
 */
const SEED_TIMINGS = join(root, "scripts", "test-timings-seed");
function timingsOrSeed(file) {
  const own = readTimings(file);
  return Object.keys(own).length > 0 ? own : readTimings(join(SEED_TIMINGS, basename(file)));
}
const previousTimings = timingsOrSeed(timingsFile);
const files = slowestFirst(
  everyFile
    .filter((f) => !fast || markOf(f) === "in-process")
    .filter((f) => only.length === 0 || only.some((o) => f.includes(o))),
  previousTimings,
  nameOf,
);
if (files.length === 0) {
  process.stderr.write(`npm test: no test file matches ${only.join(", ")}${fast ? " among the unmarked ones" : ""}\n`);
  process.exit(1);
}

// The tests' temporary directories (blob stores, data dirs, keys: thousands a run) go in one
// directory of the run's own, given as TMPDIR and removed at the end, so a test that does not
// remove its own leaves nothing behind on the machine. Sticky and open to all, as /tmp is: the
// PostgreSQL clusters and sandboxes the tests start run as other users.
/**
 * The `kiln` CLI runs on its users' node from 20 up, so its tests run twice: in the main run on the
 * runtime, and with the bundle on the machine's node (the servers they start stay on the runtime).
 * Those are packages/cli's tests and packages/mcp's that start `kiln mcp`, but for the ones whose
 * time is real cargo builds of registry crates through the dependency gateway and of edits on a
 * warm lineage (more than ten minutes on two cores): what the CLI does in them (capture, upload,
 * log stream, exit code) is what cargo and unchanged-reruns have it do on that node. On that node
 * the tests against a real server run on SQLite alone (CLI_DIALECTS, packages/cli/test/harness.ts).
 */
const CLI_TESTS_ON_THE_RUNTIME_ONLY = [
  "dependency-gateway-crates.sandbox.test.js",
  "dependency-gateway.sandbox.test.js",
  "dependency-gateway-private.sandbox.test.js",
  "inner-loop-edits.sandbox.test.js",
  "dashboard-browser-e2e.browser.test.js",
  // A job in a microVM under emulation: minutes of the guest's time, none of it the CLI's.
  "microvm-jobs.sandbox.test.js",
];
const MCP_TESTS_OF_THE_BUNDLE = ["stdio.process.test.js", "http.process.test.js", "submit-and-wait.process.test.js"];
function alsoOnMachineNode(file) {
  const [, pkg, , , name] = relative(root, file).split(sep);
  if (pkg === "cli") return !CLI_TESTS_ON_THE_RUNTIME_ONLY.includes(name);
  return pkg === "mcp" && MCP_TESTS_OF_THE_BUNDLE.includes(name);
}

const runTmp = mkdtempSync(join(tmpdir(), "kiln-test-run-"));
chmodSync(runTmp, 0o1777);

// Lint while the cluster starts: both take seconds, and neither needs the other.
const lint = spawn(join(root, "node_modules", ".bin", "biome"), ["check", "."], { cwd: root, stdio: "inherit" });
const linted = new Promise((resolve) => lint.on("close", (code) => resolve(code === 0)));
const cluster = await startThrowawayCluster();
if (!(await linted)) {
  await cluster.stop();
  rmSync(runTmp, { recursive: true, force: true });
  process.stderr.write("npm test: lint/format check failed (run `npm run format` and `npx biome check .`)\n");
  process.exit(1);
}
let failed = true;
try {
  // The test files' processes inherit this process's environment.
  process.env.TMPDIR = runTmp;
  // Every node process of the run (test files, shards, kiln-servers, kiln-hosts, the CLI on the
  // runtime) keeps the V8 code of the modules it compiles in the run's directory, where the next
  // one to load them reads it: compiling the packages' and their dependencies' modules was a sixth
  // of each process's start, and the run starts hundreds. Node keys each entry by the module's
  // content and its own version (the machine's Node 20 has no compile cache and ignores this).
  process.env.NODE_COMPILE_CACHE ??= join(runTmp, "node-compile-cache");
  process.env.KILN_TEST_POSTGRES_URL = cluster.url;
  // The machine's own node, for the tests of what kiln does on one too old for it.
  process.env.KILN_TEST_MACHINE_NODE = runtime.machine.node;
  // The kiln-servers and kiln-hosts the tests start isolate attempts in the sandbox unless a test
  // asks otherwise: the default, auto, builds the guest images into each fresh data dir and boots a
  // probe guest at every start (10–20 s of a start on two loaded cores, and this machine's KVM
  // never boots one). The microVM's own tests choose it explicitly.
  process.env.KILN_EXECUTOR ??= "sandbox";
  // The fast reliability trials first (docs/reliability.md: seconds each, no timing in any
  // verdict), so the test runner's summary stays the closing one.
  const trials =
    only.length === 0 && !fast
      ? spawnSync(process.execPath, [join(root, "scripts", "run-reliability.mjs"), "--gate"], {
          cwd: root,
          stdio: "inherit",
        }).status
      : 0;
  // The CLI's tests again with the `kiln` bundle on the machine's node (KILN_TEST_CLI_NODE, read
  // by packages/cli/test/harness.ts and packages/mcp/test/harness.ts), when that is not the runtime.
  const cliFiles = fast || runtime.machine.node === runtime.node ? [] : files.filter(alsoOnMachineNode);
  process.stdout.write(`npm test: every test, its kiln-servers and kiln-hosts on Node.js ${runtime.version}\n`);
  // Three lanes at once: the marked files streamed here, the in-process files in shard processes
  // and the CLI's second pass in a process of its own, each of those printed whole as it ends. The
  // in-process files and the CLI's pass wait on PostgreSQL, servers and timers most of the time,
  // which the marked files' builds fill.
  const dir = mkdtempSync(join(runTmp, "lanes-"));
  const inProcess = files.filter((f) => markOf(f) === "in-process");
  const marked = files.filter((f) => markOf(f) !== "in-process");
  // On a machine the gate saturates its wall time is the CPU the tests spend (docs/benchmarks.md):
  // the machine's busy CPU while they run is printed beside the time.
  const busyBefore = machineBusySeconds();
  const postgresBefore = cluster.cpuSeconds();
  const lanesStarted = performance.now();
  const [shards, cliPass, markedRun] = await Promise.all([
    runShards(inProcess, dir),
    cliFiles.length === 0
      ? { failed: false, tests: 0, measured: [], cpuSeconds: 0 }
      : runLane(
          {
            title: `the kiln CLI's tests with the CLI on the machine's Node.js ${runtime.machine.version}`,
            files: cliFiles,
            options: ["--isolation", "process", "--concurrency", "1"],
            env: { ...process.env, KILN_TEST_CLI_NODE: runtime.machine.node },
          },
          dir,
          "cli",
        ),
    marked.length === 0 ? { failed: false, tests: 0, measured: new Map() } : runTestFiles(marked, dir),
  ]);
  const busy = machineBusySeconds() - busyBefore;
  const postgresBusy = cluster.cpuSeconds() - postgresBefore;
  const lanesSeconds = (performance.now() - lanesStarted) / 1000;
  const inShards = new Map(shards.measured.map(([file, timing]) => [nameOf(file), timing]));
  recordTimings(fastTimingsFile, readTimings(fastTimingsFile), inShards, new Set(everyFile.map(nameOf)), at());
  if (markedRun.measured.size > 0)
    recordTimings(timingsFile, previousTimings, markedRun.measured, new Set(everyFile.map(nameOf)), at());
  if (cliPass.failed)
    process.stderr.write(`npm test: the kiln CLI's tests on Node.js ${runtime.machine.version} failed\n`);
  const testsFailed = shards.failed || markedRun.failed || cliPass.failed;
  process.stdout.write(
    [
      `npm test: the ten slowest files (wall time, ${relative(root, timingsFile)}; in-process files' in their shard, ${relative(root, fastTimingsFile)}):`,
      ...slowestLines(new Map([...markedRun.measured, ...inShards])),
      ...(markedRun.measured.size === 0
        ? []
        : [
            `npm test: the ten costliest files run in a process of their own (CPU with what they started, PostgreSQL's apart; wall time in brackets; all ${markedRun.measured.size} of them: ${[...markedRun.measured.values()].reduce((n, t) => n + (t.cpuSeconds ?? 0), 0).toFixed(0)} CPU-s):`,
            ...costliestLines(markedRun.measured),
          ]),
      `npm test: the tests took ${lanesSeconds.toFixed(0)} s; the machine's ${availableParallelism()} cores were busy ${busy.toFixed(0)} CPU-s of it (${((100 * busy) / (lanesSeconds * availableParallelism())).toFixed(0)} %, other work on the machine included)`,
      `npm test: of those, ${postgresBusy.toFixed(0)} CPU-s were PostgreSQL's, ${shards.cpuSeconds.toFixed(0)} the in-process files' shards'${cliFiles.length > 0 ? `, ${cliPass.cpuSeconds.toFixed(0)} the CLI's second pass's` : ""}, ${(busy - postgresBusy - shards.cpuSeconds - cliPass.cpuSeconds).toFixed(0)} the marked files' with what they start (servers, hosts, builds, guests) and the rest of the machine's`,
      `npm test: ${shards.tests + markedRun.tests} tests in ${files.length} files${cliFiles.length > 0 ? `, and ${cliPass.tests} of the CLI's again on Node.js ${runtime.machine.version}` : ""}: ${testsFailed ? "FAILED" : "all passed"}`,
      "",
    ].join("\n"),
  );
  failed = testsFailed || trials !== 0;
} finally {
  await cluster.stop();
  rmSync(runTmp, { recursive: true, force: true });
}
// Not process.exit: it could cut off the summary still being written to a pipe.
process.exitCode = failed ? 1 : 0;

/** CPU-seconds every core of the machine has spent busy since boot. */
function machineBusySeconds() {
  return machineCpuTicks().busy / 100;
}

/** Now, as the timings files record it. */
function at() {
  return new Date().toISOString();
}

/**
 * Runs the marked files, `CONCURRENCY` at a time in the order given (node's `--test` would sort
 * them), under the spec reporter on stdout, each file's process with scripts/test-file-cpu.mjs
 * preloaded. Resolves with whether any test or file failed (a file that never reported failed:
 * it did not run), the number of tests, and each file's wall time and CPU.
 */
async function runTestFiles(ordered, dir) {
  // A test that never settles (a wait on a condition that cannot come) fails by name after
  // TEST_TIMEOUT_MS instead of holding the whole run until CI's own limit; no verdict rests on it,
  // the slowest test (real builds on a loaded machine) takes a fraction of it.
  const cpuFile = join(dir, "marked-cpu.jsonl");
  const events = run({
    files: ordered,
    concurrency: CONCURRENCY,
    timeout: TEST_TIMEOUT_MS,
    execArgv: ["--import", join(root, "scripts", "test-file-cpu.mjs")],
    env: { ...process.env, KILN_TEST_CPU_FILE: cpuFile },
  });
  const measured = new Map();
  let anyFailed = false;
  let tests = 0;
  const timed = new Transform({
    objectMode: true,
    transform(event, _encoding, done) {
      const { type, data } = event;
      if (type === "test:fail" && !data.todo) anyFailed = true;
      // A file's own test: the process that ran it, from spawn to exit.
      if (type === "test:complete" && data.nesting === 0 && data.name === data.file) {
        measured.set(nameOf(data.file), {
          seconds: Math.round(data.details.duration_ms / 100) / 10,
          passed: data.details.passed,
        });
      } else if (
        (type === "test:pass" || type === "test:fail") &&
        data.details.type !== "suite" &&
        data.name !== data.file
      )
        tests++;
      done(null, event);
    },
  });
  const report = events.pipe(timed).pipe(spec());
  report.pipe(process.stdout);
  await finished(report);
  for (const [file, cpuSeconds] of readFileCpu(cpuFile)) {
    const timing = measured.get(nameOf(file));
    if (timing !== undefined) timing.cpuSeconds = Math.round(cpuSeconds * 10) / 10;
  }
  return { failed: anyFailed || measured.size !== ordered.length, tests, measured };
}

/**
 * One lane in a process of its own (scripts/run-test-shard.mjs with `options`, environment
 * `env`), its report printed whole when it ends. Resolves with { failed, tests, measured, cpuSeconds }.
 */
async function runLane({ title, files, options = [], env = process.env }, dir, id) {
  const filesJson = join(dir, `files-${id}.json`);
  const resultJson = join(dir, `result-${id}.json`);
  writeFileSync(filesJson, JSON.stringify(files));
  const child = spawn(
    process.execPath,
    [join(root, "scripts", "run-test-shard.mjs"), filesJson, resultJson, ...options],
    {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const output = [];
  child.stdout.on("data", (chunk) => output.push(chunk));
  const code = await new Promise((resolve) => child.on("close", resolve));
  process.stdout.write(`npm test: ${title} (${files.length} files)\n`);
  process.stdout.write(Buffer.concat(output));
  if (code !== 0 || !existsSync(resultJson)) return { failed: true, tests: 0, measured: [], cpuSeconds: 0 };
  return JSON.parse(readFileSync(resultJson, "utf8"));
}

/**
 * The in-process files dealt into SHARDS shards of about equal recorded time, each run in
 * one process (scripts/run-test-shard.mjs), all at once; each shard's report is printed whole as
 * it ends. A file's time in a shared process is not its time alone, which orders the marked
 * files, so these go to a file of their own (fastTimingsFile). Resolves with { failed, tests,
 * measured, cpuSeconds }.
 */
async function runShards(files, dir) {
  if (files.length === 0) return { failed: false, tests: 0, measured: [], cpuSeconds: 0 };
  // Dealt longest first, each to the shard with the least so far, by the files' last times in a
  // shard (their times alone where they have none yet).
  const previousInShards = timingsOrSeed(fastTimingsFile);
  const secondsOf = (file) => previousInShards[nameOf(file)]?.seconds ?? previousTimings[nameOf(file)]?.seconds ?? 5;
  const ordered = [...files].sort((a, b) => secondsOf(b) - secondsOf(a));
  const shards = Array.from({ length: Math.min(SHARDS, ordered.length) }, () => ({ files: [], seconds: 0 }));
  for (const file of ordered) {
    const lightest = shards.reduce((a, b) => (b.seconds < a.seconds ? b : a));
    lightest.files.push(file);
    lightest.seconds += secondsOf(file);
  }
  const results = await Promise.all(
    shards.map((shard, i) =>
      runLane({ title: `shard ${i + 1} of ${shards.length} of the in-process files`, files: shard.files }, dir, i),
    ),
  );
  return {
    failed: results.some((r) => r.failed),
    tests: results.reduce((n, r) => n + r.tests, 0),
    measured: results.flatMap((r) => r.measured),
    cpuSeconds: results.reduce((n, r) => n + r.cpuSeconds, 0),
  };
}
