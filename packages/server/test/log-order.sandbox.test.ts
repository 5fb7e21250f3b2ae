/**
 * The stored log is in the order the job wrote it, across stdout and stderr (issue 36): real
 * cargo in the real sandbox through the whole service, 50 jobs cold (each its own repository,
 * so its own fresh lineage) and 50 warm (one repository, its lineage warm from the second job on),
 * each compared line by line with the order its processes wrote.
 *
 * The crate is a binary with one unit test (cargo writes `Running unittests src/main.rs` on
 * stderr, then libtest writes on stdout: the pair that came out swapped on cold runs) and a test
 * target without the libtest harness that writes numbered lines alternately on stdout and
 * stderr, each stdout line one write(2), with no pause between the two descriptors.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { onboardRepository } from "@kiln/storage";
import { crate, type Doc, type Embedded, explainJob, Jobs, startEmbedded } from "../src/testing/e2e-jobs.js";

const RUNS = 50;
const NUMBERED_LINES = 300;

const SOURCE = crate("interleave", {
  // Without debug info or incremental state: a cold build compiles and links a ninth of the bytes
  // (2 MiB of target dir, not 18), which each job's lineage then saves; what cargo and the test
  // binaries write, and in which order, is the same.
  "Cargo.toml": `[package]\nname = "interleave"\nversion = "0.1.0"\nedition = "2021"\n\n[[test]]\nname = "interleave"\nharness = false\n\n[profile.dev]\ndebug = 0\nincremental = false\n`,
  "src/main.rs": `fn main() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(2 + 2, 4);\n    }\n}\n`,
  "tests/interleave.rs": `use std::io::Write;\n\nfn main() {\n    let out = std::io::stdout();\n    let err = std::io::stderr();\n    for i in 1..=${NUMBERED_LINES} {\n        writeln!(out.lock(), "{i} out").unwrap();\n        writeln!(err.lock(), "{i} err").unwrap();\n    }\n}\n`,
});

/** The records cargo and the test binaries wrote after `Finished`, as `stream text` with hashes and timings blanked. */
function afterFinished(records: Doc[]): string[] {
  const cargo = records.filter((r) => r.stream !== "system");
  const finished = cargo.findIndex((r) => /^\s*Finished /.test(r.text));
  assert.ok(finished >= 0, "cargo's Finished line is in the log");
  return cargo.slice(finished + 1).map(
    (r) =>
      `${r.stream} ${String(r.text)
        .trim()
        .replace(/-[0-9a-f]{16}\)/, "-HASH)")
        .replace(/finished in [\d.]+s/, "finished in Ts")}`,
  );
}

const EXPECTED = [
  "stderr Running unittests src/main.rs (/kiln/target/debug/deps/interleave-HASH)",
  "stdout ",
  "stdout running 1 test",
  // As local cargo prints it: the time kiln's test runner has libtest report (issue 37,
  // --report-time) is the evidence's, not the log's.
  "stdout test tests::adds ... ok",
  "stdout ",
  "stdout test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in Ts",
  "stdout ",
  "stderr Running tests/interleave.rs (/kiln/target/debug/deps/interleave-HASH)",
  ...Array.from({ length: NUMBERED_LINES }, (_, i) => [`stdout ${i + 1} out`, `stderr ${i + 1} err`]).flat(),
];

async function records(jobs: Jobs, id: string): Promise<Doc[]> {
  const all: Doc[] = [];
  let cursor: string | null = null;
  for (;;) {
    const res = await jobs.api("GET", `/api/jobs/${id}/logs?limit=1000${cursor === null ? "" : `&cursor=${cursor}`}`);
    assert.equal(res.status, 200, res.body);
    const page = res.json();
    all.push(...page.records);
    if (page.next_cursor === null || page.records.length === 0) return all;
    cursor = page.next_cursor;
  }
}

describe("the stored log keeps the order the job wrote across stdout and stderr", () => {
  let embedded: Embedded;

  before(async () => {
    embedded = await startEmbedded();
  });
  after(() => embedded.close());

  async function runAndCompare(jobs: Jobs, key: string, cache: "cold" | "warm"): Promise<void> {
    const id = await jobs.submit(SOURCE, key);
    const job = await jobs.settle(id);
    assert.equal(job.status, "passed", await explainJob(jobs, id));
    const evidence = await jobs.evidence(id);
    assert.equal(evidence.report.caches[0]?.outcome, cache, `${key}: ${JSON.stringify(evidence.report.caches)}`);
    const written = afterFinished(await records(jobs, id));
    const firstDifference = EXPECTED.findIndex((line, i) => written[i] !== line);
    assert.equal(
      firstDifference,
      -1,
      `${key} (${cache}): stored line ${firstDifference + 1} after Finished is ${JSON.stringify(written[firstDifference])}, written as ${JSON.stringify(EXPECTED[firstDifference])}`,
    );
    assert.deepEqual(written.slice(0, EXPECTED.length), EXPECTED);
  }

  it(`${RUNS} cold runs in a row, each in a repository of its own`, async () => {
    for (let run = 0; run < RUNS; run++) {
      const repository = `acme/interleave-cold-${run}`;
      await onboardRepository(
        embedded.storage,
        { tenantId: embedded.tenant, name: repository, onboardedBy: "test" },
        new Date(),
      );
      await runAndCompare(new Jobs(embedded.jobs.api, repository), `cold-${run}`, "cold");
    }
  });

  it(`${RUNS} warm runs in a row of one repository`, async () => {
    const repository = "acme/interleave-warm";
    await onboardRepository(
      embedded.storage,
      { tenantId: embedded.tenant, name: repository, onboardedBy: "test" },
      new Date(),
    );
    const jobs = new Jobs(embedded.jobs.api, repository);
    await runAndCompare(jobs, "warm-up", "cold");
    for (let run = 0; run < RUNS; run++) await runAndCompare(jobs, `warm-${run}`, "warm");
  });
});
