import assert from "node:assert/strict";
import { bearer, hostProtocolOf, type TestApp } from "../src/testing/harness.js";
import { inlineSubmission } from "../src/testing/job-fixtures.js";

let keys = 0;

/**
 * Submits a build job of `repository` through the API and finishes it through the host protocol
 * as a test host (no cargo) whose attempt saved `lineage` cold for `reason`: what the lineage
 * listings, advisories and usage read. The clock moves a minute, so the attempt is metered.
 */
export async function finishColdJob(
  t: TestApp,
  input: { token: string; repository: string; lineage: string; reason: string; savedBytes: number; generation: number },
): Promise<void> {
  const protocol = hostProtocolOf(t.deps);
  keys += 1;
  const res = await t.app.inject({
    method: "POST",
    url: "/api/v4/jobs",
    headers: { ...bearer(input.token), "idempotency-key": `cold-job-${process.pid}-${keys}` },
    payload: inlineSubmission(input.repository, "build"),
  });
  assert.equal(res.statusCode, 200, res.body);
  await protocol.enroll({ id: "local", vcpus: 16, memoryBytes: 2 ** 34, isolation: "sandbox" });
  const placement = await protocol.claim("local", 16);
  assert.ok(placement !== null);
  await t.clock.advance(60_000);
  const finished = await protocol.finish(placement, {
    outcome: "passed",
    exitCode: 0,
    failure: null,
    report: {
      phases: [],
      crates: [],
      tests: [],
      unit: null,
      caches: [
        {
          lineage: input.lineage,
          class: "build/dev/stable",
          outcome: "cold",
          reason: input.reason,
          restored_bytes: 0,
          saved_bytes: input.savedBytes,
          saved_generation: input.generation,
          root_generation: input.generation,
        },
      ],
    },
    cargoOutput: null,
    lineageSave: {
      lineage: input.lineage,
      bytes: input.savedBytes,
      generation: input.generation,
      rootGeneration: input.generation,
    },
    artifacts: [],
  });
  assert.equal(finished, "finished");
}
