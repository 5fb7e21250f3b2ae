import assert from "node:assert/strict";
import type { AttemptReport } from "@kiln/contract";
import type { TestApp } from "./harness.js";
import { submitAndPlace } from "./job-fixtures.js";

/**
 * Issue 37's evidence in the agreed shape (the flaky helper's host produces it; these fixtures
 * stand in for it on the presentation side): five test jobs of one repository, submitted through
 * the API and finished through the host protocol, for the history read, the CLI and the pages.
 */

export type ReportedTest = AttemptReport["tests"][number];

export const FLAKY_TEST = "net::retries_on_reset";
export const SLOW_TEST = "parse::large_input";
export const BROKEN_TEST = "store::roundtrip";

/** Job n (0–4) of five: FLAKY_TEST flaky in jobs 1 and 3, SLOW_TEST slower from job 3, BROKEN_TEST failing in job 4. */
export function testsOfJob(n: number): ReportedTest[] {
  const flaky = n === 1 || n === 3;
  return [
    {
      target: "widget (lib)",
      name: FLAKY_TEST,
      outcome: "passed",
      duration_ms: 30,
      ...(flaky
        ? {
            flaky: true,
            tries: [
              { try: 1, outcome: "failed", duration_ms: 12, output: "thread panicked: connection reset" },
              { try: 2, outcome: "passed", duration_ms: 30, output: "" },
            ],
          }
        : {}),
    },
    {
      target: "widget (lib)",
      name: SLOW_TEST,
      outcome: "passed",
      duration_ms: [100, 110, 120, 260, 280][n] ?? 0,
    },
    { target: "widget::store", name: BROKEN_TEST, outcome: n === 4 ? "failed" : "passed", duration_ms: 4 },
  ];
}

/** The rest of an issue-37 test attempt's report: binaries' wall time, the retries, cargo's timeline. */
export function issue37Report(tests: ReportedTest[]): AttemptReport {
  const flaky = tests.filter((t) => t.flaky === true).length;
  const failed = tests.filter((t) => t.outcome === "failed").length;
  return {
    phases: [],
    crates: [],
    tests,
    unit: null,
    test_binaries: [
      { target: "widget (lib)", duration_ms: 420, tests: 2 },
      { target: "widget::store", duration_ms: 15, tests: 1 },
    ],
    retries: {
      flaky_retries: 2,
      flaky_policy: "pass",
      reruns: flaky + failed * 2,
      flaky,
      failed_every_try: failed,
      duration_ms: 40,
    },
    timeline: {
      wall_ms: 9000,
      artifact: "cargo-timings/cargo-timing.html",
      critical_path_ms: 8000,
      critical_path_share: 0.889,
      critical_path: [
        { name: "serde", version: "1.0.210", target: "lib", start_ms: 0, duration_ms: 5000 },
        { name: "widget", version: "0.1.0", target: "test", start_ms: 5000, duration_ms: 3000 },
      ],
      units: [
        { name: "serde", version: "1.0.210", target: "lib", start_ms: 0, duration_ms: 5000 },
        { name: "itoa", version: "1.0.11", target: "lib", start_ms: 0, duration_ms: 800 },
        { name: "widget", version: "0.1.0", target: "test", start_ms: 5000, duration_ms: 3000 },
      ],
    },
  };
}

/** Submits a test job of `repository`, places it through the host protocol and finishes it with `tests`; its id. */
export async function runTestJob(
  t: TestApp,
  input: { token: string; repository: string; tests: ReportedTest[]; key: string },
): Promise<string> {
  const { protocol, placement } = await submitAndPlace(t, input);
  const failed = input.tests.some((test) => test.outcome === "failed");
  const finished = await protocol.finish(placement, {
    outcome: failed ? "failed" : "passed",
    exitCode: failed ? 101 : 0,
    failure: failed ? { phase: "test", cause: "test_failure", detail: "1 test failed" } : null,
    report: issue37Report(input.tests),
    cargoOutput: null,
    lineageSave: null,
    artifacts: [],
  });
  assert.equal(finished, "finished");
  return placement.jobId;
}

/** The five jobs of testsOfJob, oldest first; their ids. */
export async function runFiveTestJobs(t: TestApp, token: string, repository: string): Promise<string[]> {
  const jobs: string[] = [];
  for (let n = 0; n < 5; n++) {
    jobs.push(await runTestJob(t, { token, repository, tests: testsOfJob(n), key: `history-${repository}-${n}` }));
  }
  return jobs;
}
