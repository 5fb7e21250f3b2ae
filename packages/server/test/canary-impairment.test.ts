import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { claimNextJob, registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { ImpairmentDetector } from "../src/domain/hosts/impairment/impairment-detector.js";
import { type CanaryFailure, CanaryRunner } from "../src/domain/platform/canaries/canary-runner.js";
import { canarySettings } from "../src/domain/platform/canaries/canary-settings.js";
import { VCPUS_OF_SIZE } from "../src/domain/policy/platform-limits.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { finishJob } from "../src/testing/job-fixtures.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/**
 * Issue 18: "Platform anomalies raised on host impairment (… canary failures)". A host's failed
 * canary reaches the impairment detector through the canary runner (as main.ts wires them): a
 * `canary_failed` platform anomaly for that host, its incident, admission closed so nothing more
 * is placed there — told once per canary, and a host whose canary passed is left alone.
 */
const SETTINGS = canarySettings({ intervalSeconds: 300, lateAfterSeconds: 240 });

for (const dialect of DIALECTS) {
  describe(`a failed canary impairs its host (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let operator: OperatorClient;
    let runner: CanaryRunner;
    const told: CanaryFailure[] = [];

    before(async () => {
      t = await testApp(await dialect.openFresh(), { canaries: SETTINGS });
      operator = await operatorClient(t.app, t.storage, t.clock.now());
      const detector = new ImpairmentDetector({ storage: t.storage, clock: t.clock, log: silentLogger });
      runner = new CanaryRunner({
        storage: t.storage,
        clock: t.clock,
        log: silentLogger,
        settings: SETTINGS,
        app: t.app,
        onCanaryFailure: async (failure) => {
          told.push(failure);
          await detector.reportCanaryFailure(failure);
        },
      });
    });
    after(() => t.close());

    const hostAlive = (id: string) =>
      registerHost(t.storage, { id, vcpus: 16, memoryBytes: 2 ** 35, isolation: "sandbox", now: t.clock.now() });
    const claimAs = (hostId: string) =>
      claimNextJob(t.storage, {
        hostId,
        freeVcpus: 16,
        vcpusOfSize: VCPUS_OF_SIZE,
        leaseSeconds: 15,
        now: t.clock.now(),
      });

    it("a failed canary raises canary_failed for its host and closes that host's admission only", async () => {
      await hostAlive("builder-1");
      await hostAlive("builder-2");
      const pass = await runner.runOnce();
      assert.equal(pass.submitted.length, 2, JSON.stringify(pass));
      for (const [host, outcome] of [
        ["builder-1", "failed"],
        ["builder-2", "passed"],
      ] as const) {
        const placed = await claimAs(host);
        assert.ok(placed, `${host} is handed its canary`);
        await t.clock.advance(2000);
        await finishJob(
          t.storage,
          t.deps.blobs,
          { jobId: placed.job.id, attempt: placed.attempt.number, leaseToken: placed.attempt.lease_token },
          { now: t.clock.now(), outcome },
        );
      }
      const failedJob = pass.submitted.find((s) => s.host === "builder-1")?.jobId;
      assert.ok(failedJob);

      await runner.runOnce();
      assert.deepEqual(
        told.map((f) => [f.hostId, f.jobId, f.verdict]),
        [["builder-1", failedJob, "failed"]],
      );
      const anomalies = (await operator.get("/operator/api/anomalies/platform")).json() as {
        host: string;
        kind: string;
        evidence: { reference?: string }[];
      }[];
      const mine = anomalies.filter((a) => a.kind === "canary_failed");
      assert.deepEqual(
        mine.map((a) => a.host),
        ["builder-1"],
      );
      assert.equal(mine[0]?.evidence[0]?.reference, `job:${failedJob}`);

      // builder-1's admission is closed: a job it could run is placed on builder-2 only.
      await t.clock.advance(SETTINGS.intervalSeconds * 1000);
      await hostAlive("builder-1");
      await hostAlive("builder-2");
      const next = await runner.runOnce();
      assert.deepEqual(
        next.submitted.map((s) => s.host),
        ["builder-2"],
        "no canary is due on a host whose admission is closed",
      );

      // Told once: another pass does not report the same canary again.
      await runner.runOnce();
      assert.equal(told.length, 1);
    });
  });
}
