#!/usr/bin/env node
// `npm test`: lint and format check, the fast reliability trials (scripts/run-reliability.mjs
// --gate), the `kiln` CLI's tests with the bundle on the machine's own node when that is not the
// runtime (CLI_TESTS_ON_THE_RUNTIME_ONLY below), then every package's tests under node's test
// runner against real SQLite and a throwaway PostgreSQL 15 cluster started here and stopped
// afterwards, all on the project's Node.js runtime (scripts/project-runtime.mjs): the tests and
// every kiln-server and kiln-host they start. The runner's closing summary is what CI reads.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { startThrowawayCluster } from "./postgres-cluster.mjs";
import { projectRuntime } from "./project-runtime.mjs";

/** Thirty minutes: a bound on one test that hangs, never a measure of speed. */
const TEST_TIMEOUT_MS = 30 * 60 * 1000;

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const only = process.argv.slice(2);
const runtime = projectRuntime(root);

const lint = spawnSync(join(root, "node_modules", ".bin", "biome"), ["check", "."], { cwd: root, stdio: "inherit" });
if (lint.status !== 0) {
  process.stderr.write("npm test: lint/format check failed (run `npm run format` and `npx biome check .`)\n");
  process.exit(1);
}

function testFiles() {
  const files = [];
  for (const pkg of readdirSync(join(root, "packages"))) {
    const dir = join(root, "packages", pkg, "dist", "test");
    // A package with tests that were not built would silently run none of them.
    if (existsSync(join(root, "packages", pkg, "test")) && !existsSync(dir)) {
      process.stderr.write(`npm test: packages/${pkg} has tests but no build of them (dist/test missing)\n`);
      process.exit(1);
    }
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir)) if (f.endsWith(".test.js")) files.push(join(dir, f));
  }
  return only.length === 0 ? files : files.filter((f) => only.some((o) => f.includes(o)));
}

/**
 * The `kiln` CLI runs on its users' node from 20 up, so its tests run twice: in the main run on the
 * runtime, and with the bundle on the machine's node (the servers they start stay on the runtime).
 * Those are packages/cli's tests and packages/mcp's that start `kiln mcp`, but for the ones whose
 * time is real cargo builds of registry crates through the dependency gateway and of edits on a
 * warm lineage (more than ten minutes on two cores): what the CLI does in them (capture, upload,
 * log stream, exit code) is what cargo.test.js and unchanged-reruns.test.js have it do on that node.
 */
const CLI_TESTS_ON_THE_RUNTIME_ONLY = [
  "dependency-gateway-crates.test.js",
  "dependency-gateway.test.js",
  "dependency-gateway-private.test.js",
  "inner-loop-edits.test.js",
];
const MCP_TESTS_OF_THE_BUNDLE = ["stdio.test.js", "http.test.js", "submit-and-wait.test.js"];
function alsoOnMachineNode(file) {
  const [, pkg, , , name] = relative(root, file).split(sep);
  if (pkg === "cli") return !CLI_TESTS_ON_THE_RUNTIME_ONLY.includes(name);
  return pkg === "mcp" && MCP_TESTS_OF_THE_BUNDLE.includes(name);
}

// The tests' temporary directories (blob stores, data dirs, keys: thousands a run) go in one
// directory of the run's own, given as TMPDIR and removed at the end, so a test that does not
// remove its own leaves nothing behind on the machine. Sticky and open to all, as /tmp is: the
// PostgreSQL clusters and sandboxes the tests start run as other users.
const runTmp = mkdtempSync(join(tmpdir(), "kiln-test-run-"));
chmodSync(runTmp, 0o1777);
const env = { ...process.env, TMPDIR: runTmp };

const cluster = await startThrowawayCluster();
let status = 1;
try {
  const files = testFiles();
  // KILN_TEST_MACHINE_NODE: the machine's own node, for the tests of what kiln does on one too old for it.
  const testEnv = { ...env, KILN_TEST_POSTGRES_URL: cluster.url, KILN_TEST_MACHINE_NODE: runtime.machine.node };
  const runTests = (testFilesToRun, extraEnv = {}) =>
    // A test that never settles (a wait on a condition that cannot come) fails by name after
    // TEST_TIMEOUT_MS instead of holding the whole run until CI's own limit; no verdict rests on it,
    // the slowest test (real builds on a loaded machine) takes a fraction of it.
    spawnSync(
      runtime.node,
      ["--test", "--test-concurrency=2", `--test-timeout=${TEST_TIMEOUT_MS}`, ...testFilesToRun],
      {
        cwd: root,
        stdio: "inherit",
        env: { ...testEnv, ...extraEnv },
      },
    ).status;
  const failed = [];
  // The fast reliability trials (docs/reliability.md: seconds each, no timing in any verdict) and
  // the CLI's second pass first, so the main run's summary stays the closing one.
  if (only.length === 0) {
    const trials = spawnSync(runtime.node, [join(root, "scripts", "run-reliability.mjs"), "--gate"], {
      cwd: root,
      stdio: "inherit",
      env: testEnv,
    });
    if (trials.status !== 0) failed.push("the reliability trials");
  }
  // The CLI's tests again with the `kiln` bundle on the machine's node (KILN_TEST_CLI_NODE, read
  // by packages/cli/test/harness.ts and packages/mcp/test/harness.ts), when that is not the runtime.
  const cliFiles = files.filter(alsoOnMachineNode);
  if (runtime.machine.node !== runtime.node && cliFiles.length > 0) {
    process.stdout.write(
      `npm test: the kiln CLI's tests with the CLI on the machine's Node.js ${runtime.machine.version}\n`,
    );
    if (runTests(cliFiles, { KILN_TEST_CLI_NODE: runtime.machine.node }) !== 0) {
      failed.push(`the kiln CLI's tests on Node.js ${runtime.machine.version}`);
    }
  }
  process.stdout.write(`npm test: every test, its kiln-servers and kiln-hosts on Node.js ${runtime.version}\n`);
  if (runTests(files) !== 0) failed.push("the tests");
  if (failed.length > 0) process.stderr.write(`npm test: failed: ${failed.join("; ")}\n`);
  status = failed.length === 0 ? 0 : 1;
} finally {
  await cluster.stop();
  rmSync(runTmp, { recursive: true, force: true });
}
process.exit(status);
