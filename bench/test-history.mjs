// What the test history (issue 37, migration 0046) costs kiln's storage on a regex-sized suite:
// the transaction that finishes an attempt now also records its tests (storage
// test-history/record-test-outcomes.ts), and repositories.tests reads a window of jobs grouped
// per test (test-history/list-test-history.ts).
//
// Write: --jobs (default 20) test jobs of --tests tests each (default 7,847, regex's count), each
// finished through finishAttempt; the baseline, in the same run and interleaved, finishes the
// same jobs with the same report bytes under a member the history does not read
// (`tests_not_recorded`), so both arms store equal JSON and differ by the recording alone.
// Read: over the recorded jobs, listTestHistory's first page (limit 50) in each sort order,
// --reads (default 5) times each; its median.
//
// SQLite (kiln's storage on a fresh data dir). `node bench/test-history.mjs [--jobs 20] [--tests 7847] [--reads 5]`
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeMachine } from "./support/machine.mjs";
import { positiveIntegerOption } from "./support/options.mjs";
import { median } from "./support/statistics.mjs";

const { openStorage, createTenant, registerHost, insertJob, listTestHistory } = await import("@kiln/storage");
// The tests' own job row, claim and attempt completion, so the bench measures what the storage tests do.
const { attemptCompletion, claimAs, finishPlaced, queuedJob } = await import("@kiln/storage/testing");

const JOBS = positiveIntegerOption("jobs", 20);
const TESTS = positiveIntegerOption("tests", 7847);
const READS = positiveIntegerOption("reads", 5);
const T0 = Date.parse("2026-11-29T08:00:00.000Z");

function reportOf(job, member) {
  const tests = Array.from({ length: TESTS }, (_, i) => ({
    target: `regex-test (test) ${i % 8}`,
    name: `suite::module_${i % 97}::case_${i}`,
    outcome: i % 500 === 0 && job % 4 === 1 ? "passed" : i % 1000 === 7 ? "ignored" : "passed",
    duration_ms: (i * 7 + job) % 40,
    ...(i % 500 === 0 && job % 4 === 1 ? { flaky: true } : {}),
  }));
  return JSON.stringify({ phases: [], crates: [], [member]: tests, unit: null });
}

/** Inserts, places and finishes job n of `tenant` with its report under `member`; the finish's milliseconds. */
async function finishJob(storage, tenant, member, n) {
  const id = `job_${tenant}_${n}`;
  const at = new Date(T0 + n * 60_000);
  await insertJob(
    storage,
    queuedJob(
      { id, tenant, submissionKey: id, requestHash: id, queuedAt: at.toISOString() },
      { repository: "rust-lang/regex", description: "cargo test", submitted_by: "bench" },
    ),
  );
  const placed = await claimAs(storage, "bench-host", at, { freeVcpus: 64, leaseSeconds: 600 });
  if (placed?.job.id !== id) throw new Error(`${id} was not placed`);
  const report = reportOf(n, member);
  const started = performance.now();
  await finishPlaced(storage, placed, new Date(at.getTime() + 30_000), attemptCompletion("passed", { report }), 30);
  return performance.now() - started;
}

const dataDir = mkdtempSync(join(tmpdir(), "kiln-bench-test-history-"));
const storage = await openStorage({ dataDir });
try {
  const now = new Date(T0);
  await registerHost(storage, { id: "bench-host", vcpus: 64, memoryBytes: 2 ** 37, isolation: "sandbox", now });
  await createTenant(storage, { id: "recorded" }, now);
  await createTenant(storage, { id: "baseline" }, now);
  // Interleaved, each arm first in turn.
  const arms = { baseline: [], recorded: [] };
  const order = [
    ["baseline", "tests_not_recorded"],
    ["recorded", "tests"],
  ];
  for (let n = 0; n < JOBS; n++) {
    for (const [arm, member] of n % 2 === 0 ? order : [...order].reverse()) {
      arms[arm].push(await finishJob(storage, arm, member, n));
    }
  }
  const reads = {};
  for (const sort of ["name", "slowest", "flakiest", "newly_failing"]) {
    const samples = [];
    for (let i = 0; i < READS; i++) {
      const started = performance.now();
      const page = await listTestHistory(storage.db, {
        tenantId: "recorded",
        repository: "rust-lang/regex",
        window: JOBS,
        sort,
        limit: 50,
        cursor: null,
      });
      samples.push(performance.now() - started);
      if (i === 0 && sort === "name" && page.window.length !== JOBS) throw new Error("the window lacks jobs");
    }
    reads[sort] = median(samples);
  }
  const base = median(arms.baseline);
  const recorded = median(arms.recorded);
  console.log(JSON.stringify({ machine: describeMachine(), jobs: JOBS, tests: TESTS }, null, 2));
  console.log(`finishAttempt with ${TESTS} tests, median of ${arms.baseline.length} each:`);
  console.log(`  baseline (same report bytes, not recorded): ${base.toFixed(1)} ms`);
  console.log(
    `  recorded in the test history:               ${recorded.toFixed(1)} ms (×${(recorded / base).toFixed(2)})`,
  );
  console.log(`repositories.tests first page (limit 50) over ${JOBS} jobs × ${TESTS} tests, median of ${READS}:`);
  for (const [sort, ms] of Object.entries(reads)) console.log(`  ${sort.padEnd(14)} ${ms.toFixed(1)} ms`);
} finally {
  await storage.close();
  rmSync(dataDir, { recursive: true, force: true });
}
