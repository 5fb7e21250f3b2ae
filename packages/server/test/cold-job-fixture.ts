import assert from "node:assert/strict";
import type { TestApp } from "../src/testing/harness.js";
import { submitAndPlace } from "../src/testing/job-fixtures.js";

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
  keys += 1;
  const { protocol, placement } = await submitAndPlace(t, {
    token: input.token,
    repository: input.repository,
    key: `cold-job-${process.pid}-${keys}`,
    operation: "build",
  });
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
