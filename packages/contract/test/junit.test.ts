import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { type JunitEvidenceInput, junitCounts, renderJunitXml } from "../src/junit.js";

/** junit-10.xsd: the schema Jenkins' xUnit plugin validates against, with Surefire's rerun elements. */
const XSD = fileURLToPath(new URL("../../test/fixtures/junit-10.xsd", import.meta.url));

/** xmllint's verdict on a document: null when it validates, else its complaint. */
function validate(xml: string): string | null {
  const dir = mkdtempSync(join(tmpdir(), "kiln-junit-"));
  try {
    const file = join(dir, "junit.xml");
    writeFileSync(file, xml);
    execFileSync("xmllint", ["--noout", "--schema", XSD, file], { stdio: "pipe" });
    return null;
  } catch (error) {
    return String((error as { stderr?: Buffer }).stderr ?? error);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const count = (xml: string, tag: string) => xml.split(`<${tag}`).length - 1;

const EVIDENCE: JunitEvidenceInput = {
  job: { id: "job_1" },
  report: {
    tests: [
      // An earlier attempt's tests are not this run's.
      { target: "demo (lib)", name: "tests::old", outcome: "failed", attempt: 1, duration_ms: 5 },
      { target: "demo (lib)", name: "tests::quick", outcome: "passed", attempt: 2, duration_ms: 12 },
      {
        target: "demo (lib)",
        name: "tests::flaky",
        outcome: "passed",
        attempt: 2,
        duration_ms: 3,
        flaky: true,
        tries: [
          { try: 1, outcome: "failed", duration_ms: 2, output: 'panicked: first run <fails> & \u0001 "quoted" 😀' },
          { try: 2, outcome: "passed", duration_ms: 3, output: "" },
        ],
      },
      {
        target: "demo::integration",
        name: "always_fails",
        outcome: "failed",
        attempt: 2,
        duration_ms: 1,
        panic: { message: "assertion failed: false" },
        failure_output: "thread 'always_fails' panicked at tests/integration.rs:3:5",
        tries: [
          { try: 1, outcome: "failed", duration_ms: 1, output: "first" },
          { try: 2, outcome: "failed", duration_ms: 1, output: "second" },
          { try: 3, outcome: "failed", duration_ms: 1, output: "third" },
        ],
      },
      {
        target: "demo::integration",
        name: "slow",
        outcome: "ignored",
        attempt: 2,
        duration_ms: null,
        ignore_reason: "slow",
      },
    ],
    test_binaries: [{ attempt: 2, target: "demo (lib)", duration_ms: 20 }],
  },
};

describe("renderJunitXml", () => {
  it("validates against junit-10.xsd and carries the evidence's counts, a suite per test binary", () => {
    const xml = renderJunitXml(EVIDENCE);
    assert.equal(validate(xml), null);
    const counts = junitCounts(EVIDENCE);
    assert.deepEqual(counts, { tests: 4, failures: 1, skipped: 1, flaky: 1 });
    assert.match(xml, /<testsuites name="kiln job job_1" tests="4" failures="1" errors="0"/);
    assert.equal(count(xml, "testsuite "), 2);
    assert.equal(count(xml, "testcase "), counts.tests);
    assert.equal(count(xml, "failure "), counts.failures);
    assert.equal(count(xml, "skipped"), counts.skipped);
    assert.match(xml, /<testsuite name="demo \(lib\)" tests="2" failures="0" errors="0" skipped="0" time="0.020">/);
    assert.match(xml, /<testcase name="tests::quick" classname="demo \(lib\)" time="0.012"\/>/);
  });

  it("writes a flaky test's failed try as flakyFailure and a failing test's re-runs as rerunFailure", () => {
    const xml = renderJunitXml(EVIDENCE);
    assert.equal(count(xml, "flakyFailure "), 1);
    assert.equal(count(xml, "rerunFailure "), 2);
    assert.match(xml, /<failure message="assertion failed: false" type="test failure">thread 'always_fails' panicked/);
    // Characters XML cannot carry are replaced, markup escaped, the rest kept.
    assert.match(xml, /first run &lt;fails&gt; &amp; \uFFFD "quoted" 😀/);
  });

  it("a document the schema refuses is refused (the check can fail)", () => {
    assert.notEqual(validate(renderJunitXml(EVIDENCE).replace(/ name="tests::quick"/, "")), null);
  });
});
