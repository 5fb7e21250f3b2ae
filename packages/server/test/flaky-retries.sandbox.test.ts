import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { junitCounts, renderJunitXml } from "@kiln/contract";
import { crate, type Doc, type Embedded, explainJob, injectApi, startEmbedded } from "../src/testing/e2e-jobs.js";
import { personWithToken } from "../src/testing/harness.js";

/**
 * Flaky retries end to end (issue 37; SQLite, real cargo, real sandbox): a crate whose
 * `flaky` test fails on its first run in a job and passes after (a marker file in the job's
 * workspace, so the verdict is deterministic), an always-failing test, a slow one, and an
 * integration test binary cargo runs after the library's.
 */
const LIB_TESTS = `
#[cfg(test)]
mod tests {
    #[test]
    fn flaky() {
        let marker = concat!(env!("CARGO_MANIFEST_DIR"), "/flaky-marker");
        if std::fs::metadata(marker).is_err() {
            std::fs::write(marker, "ran").unwrap();
            panic!("first run in this job fails");
        }
    }
    #[test]
    fn slow() { std::thread::sleep(std::time::Duration::from_millis(300)); }
    #[test]
    fn quick() { assert_eq!(super::two(), 2); }
    ALWAYS
}
`;

function flakyCrate(alwaysFails: boolean) {
  return crate("flakydemo", {
    "src/lib.rs": `pub fn two() -> u32 { 2 }\n${LIB_TESTS.replace(
      "ALWAYS",
      alwaysFails ? '#[test]\n    fn always_fails() { panic!("fails every time"); }' : "",
    )}`,
    "tests/after.rs": "#[test]\nfn integration_runs() { assert_eq!(flakydemo::two(), 2); }\n",
  });
}

const XSD = fileURLToPath(new URL("../../../contract/test/fixtures/junit-10.xsd", import.meta.url));

const testOf = (evidence: Doc, name: string): Doc => {
  const found = (evidence.report.tests as Doc[]).find((t) => t.name === name);
  assert.ok(found, `${name} is in the evidence: ${JSON.stringify(evidence.report.tests)}`);
  return found;
};

describe("flaky retries end to end (SQLite, real cargo, real sandbox)", () => {
  let e: Embedded;
  let keys = 0;
  let version = 0;

  before(async () => {
    e = await startEmbedded();
  });
  after(() => e.close());

  const settings = async (changes: Record<string, unknown>) => {
    const admin = await personWithToken(e.storage, { tenant: e.tenant, role: "admin", now: new Date() });
    const res = await injectApi(e.app, admin.token)("POST", "/api/repositories/acme/widget/settings", {
      key: `settings-${++keys}`,
      body: { version, changes },
    });
    assert.equal(res.status, 200, res.body);
    version++;
  };

  /** The job's published junit.xml, as jobs.artifact_bytes serves it. */
  const junitArtifact = async (id: string): Promise<string> => {
    const api = injectApi(e.app, e.token);
    const inventory = (await api("GET", `/api/jobs/${id}/artifacts`)).json();
    const publication = (inventory.publications as Doc[]).at(-1);
    const file = (publication?.files as Doc[] | undefined)?.find((f) => f.path === "junit.xml");
    assert.ok(file, `junit.xml is published: ${JSON.stringify(inventory)}`);
    const bytes = await api("GET", `/api/jobs/${id}/artifacts/${publication?.attempt}/${file.index}`);
    assert.equal(bytes.status, 200, bytes.body);
    return bytes.body;
  };

  async function run(files: ReturnType<typeof flakyCrate>, expected: "passed" | "failed"): Promise<Doc> {
    const id = await e.jobs.submit(files, `flaky-${++keys}`);
    const job = await e.jobs.settle(id, 300_000);
    if (job.status !== expected) assert.fail(await explainJob(e.jobs, id));
    return { ...(await e.jobs.evidence(id)), id, job, log: await e.jobs.logText(id) };
  }

  it("flaky_policy pass: the flaky test is reported with both tries, cargo goes on, the job passes; durations are measured", async () => {
    const evidence = await run(flakyCrate(false), "passed");
    const flaky = testOf(evidence, "tests::flaky");
    assert.equal(flaky.outcome, "passed");
    assert.equal(flaky.flaky, true);
    assert.deepEqual(
      (flaky.tries as Doc[]).map((t) => [t.try, t.outcome]),
      [
        [1, "failed"],
        [2, "passed"],
      ],
    );
    assert.match(String((flaky.tries as Doc[])[0].output), /first run in this job fails/);
    assert.match(String((flaky.tries as Doc[])[1].output), /test tests::flaky \.\.\. ok/);
    assert.deepEqual(evidence.report.retries, {
      flaky_retries: 2,
      flaky_policy: "pass",
      reruns: 1,
      flaky: 1,
      failed_every_try: 0,
      duration_ms: (flaky.tries as Doc[])[1].duration_ms,
    });
    // Cargo went on to the integration test binary: the library's binary passed for it.
    assert.equal(testOf(evidence, "integration_runs").outcome, "passed");
    // Every test of a libtest binary carries a measured duration; the slow one at least its sleep.
    for (const t of evidence.report.tests as Doc[]) assert.equal(typeof t.duration_ms, "number", JSON.stringify(t));
    assert.ok(Number(testOf(evidence, "tests::slow").duration_ms) >= 300);
    const binaries = evidence.report.test_binaries as Doc[];
    assert.deepEqual(
      binaries.map((b) => [b.target, b.tests]),
      [
        ["flakydemo (lib)", 3],
        ["flakydemo::after", 1],
      ],
    );
    assert.ok(Number(binaries[0]?.duration_ms) >= 300);
    // cargo ran with --timings: its report is an artifact and the evidence's timeline summarises it.
    assert.match(evidence.log, /kiln: cargo test --message-format=json-render-diagnostics --timings \(/);
    // The log reads as local cargo's: libtest's measured time is the evidence's, not the log's.
    assert.match(evidence.log, /^\[a1 stdout\] test tests::slow \.\.\. ok$/m);
    assert.doesNotMatch(evidence.log, / <\d+\.\d+s>$/m);
    const timeline = (evidence.report.timeline as Doc[] | undefined)?.[0];
    assert.ok(timeline, "a timeline");
    assert.equal(timeline.artifact, "cargo-timings/cargo-timing.html");
    assert.ok(
      (timeline.critical_path as Doc[]).some((u) => u.name === "flakydemo"),
      JSON.stringify(timeline),
    );
    assert.ok(Number(timeline.critical_path_share) > 0 && Number(timeline.critical_path_share) <= 1);
    // The failure does not stand in the evidence's failures: the job passed.
    assert.equal(evidence.report.failures, undefined);
    // The JUnit document of this evidence validates and carries its counts; the host published the same one.
    const xml = renderJunitXml(evidence as Parameters<typeof renderJunitXml>[0]);
    assert.equal(
      (await junitArtifact(String(evidence.id))).replace(/<testsuites name="[^"]*"/, ""),
      xml.replace(/<testsuites name="[^"]*"/, ""),
    );
    const dir = mkdtempSync(join(tmpdir(), "kiln-junit-"));
    try {
      writeFileSync(join(dir, "junit.xml"), xml);
      execFileSync("xmllint", ["--noout", "--schema", XSD, join(dir, "junit.xml")], { stdio: "pipe" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    assert.deepEqual(junitCounts(evidence as Parameters<typeof junitCounts>[0]), {
      tests: 4,
      failures: 0,
      skipped: 0,
      flaky: 1,
    });
    assert.equal(xml.split("<flakyFailure").length - 1, 1);
  });

  it("flaky_policy fail: the same flaky test fails the job, still reported flaky with both tries", async () => {
    await settings({ flaky_policy: "fail" });
    const evidence = await run(flakyCrate(false), "failed");
    const flaky = testOf(evidence, "tests::flaky");
    assert.equal(flaky.flaky, true);
    assert.equal((flaky.tries as Doc[]).length, 2);
    assert.equal(evidence.job.failure?.cause, "test_failure", JSON.stringify(evidence.job.failure));
    assert.match(String(evidence.job.failure?.detail), /flaky_policy fail keeps the failure/);
    await settings({ flaky_policy: "pass" });
  });

  it("an always-failing test fails every try and the job fails", async () => {
    const evidence = await run(flakyCrate(true), "failed");
    const failing = testOf(evidence, "tests::always_fails");
    assert.equal(failing.outcome, "failed");
    assert.equal(failing.flaky, undefined);
    assert.deepEqual(
      (failing.tries as Doc[]).map((t) => [t.try, t.outcome]),
      [
        [1, "failed"],
        [2, "failed"],
        [3, "failed"],
      ],
    );
    assert.equal(testOf(evidence, "tests::flaky").flaky, true, "the flaky one beside it is still found flaky");
    const retries = evidence.report.retries as Doc;
    assert.deepEqual([retries.reruns, retries.flaky, retries.failed_every_try], [3, 1, 1]);
    // A failing test job publishes its junit.xml too: the failure and its two re-runs.
    const junit = await junitArtifact(String(evidence.id));
    assert.equal(junit.split("<rerunFailure").length - 1, 2);
    assert.match(junit, /<failure message="fails every time"/);
    assert.equal(evidence.job.failure?.cause, "test_failure");
  });

  it("flaky_retries 0: nothing is re-run and the flaky test's first failure fails the job", async () => {
    await settings({ flaky_retries: 0 });
    const evidence = await run(flakyCrate(false), "failed");
    const flaky = testOf(evidence, "tests::flaky");
    assert.equal(flaky.outcome, "failed");
    assert.equal(flaky.tries, undefined);
    assert.equal((evidence.report.retries as Doc).reruns, 0);
    assert.doesNotMatch(evidence.log, /test tests::flaky \.\.\. ok/);
  });
});
