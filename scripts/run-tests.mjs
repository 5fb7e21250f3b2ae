#!/usr/bin/env node
// `npm test`: lint and format check, the fast reliability trials (scripts/run-reliability.mjs
// --gate), then every package's tests under node's test runner against real SQLite and a
// throwaway PostgreSQL 15 cluster started here and stopped afterwards. The runner's closing
// summary is what CI reads.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startThrowawayCluster } from "./postgres-cluster.mjs";

/** Thirty minutes: a bound on one test that hangs, never a measure of speed. */
const TEST_TIMEOUT_MS = 30 * 60 * 1000;

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const only = process.argv.slice(2);

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
  // The fast reliability trials first (docs/reliability.md: seconds each, no timing in any
  // verdict), so the test runner's summary stays the closing one.
  const trials =
    only.length === 0
      ? spawnSync(process.execPath, [join(root, "scripts", "run-reliability.mjs"), "--gate"], {
          cwd: root,
          stdio: "inherit",
          env: { ...env, KILN_TEST_POSTGRES_URL: cluster.url },
        }).status
      : 0;
  // A test that never settles (a wait on a condition that cannot come) fails by name after
  // TEST_TIMEOUT_MS instead of holding the whole run until CI's own limit; no verdict rests on it,
  // the slowest test (real builds on a loaded machine) takes a fraction of it.
  const result = spawnSync(
    process.execPath,
    ["--test", "--test-concurrency=2", `--test-timeout=${TEST_TIMEOUT_MS}`, ...files],
    {
      cwd: root,
      stdio: "inherit",
      env: { ...env, KILN_TEST_POSTGRES_URL: cluster.url },
    },
  );
  status = result.status === 0 && trials === 0 ? 0 : 1;
} finally {
  await cluster.stop();
  rmSync(runTmp, { recursive: true, force: true });
}
process.exit(status);
