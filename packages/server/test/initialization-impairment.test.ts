import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { registerHost, reportHostInitialization, startHostInitialization } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { ledgerOfReport, pendingLedger } from "../src/domain/hosts/fleet/initialization-ledger.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { detectorFor, operatorSession } from "./host-recovery-fixtures.js";

/**
 * Issue 18: "Platform anomalies raised on host impairment (… a failed initialization step …)".
 * An initialization the operator started (operator.hosts.initialization.start) whose host
 * reported a failed step is read by the impairment detector: an `initialization_failed`
 * platform anomaly naming the initialization, the host's incident, and its admission closed.
 */
for (const dialect of DIALECTS) {
  describe(`a failed initialization impairs its host (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await testApp(await dialect.openFresh());
    });
    after(() => t.close());

    it("raises initialization_failed naming the initialization and closes the host's admission", async () => {
      const op = await operatorSession(t);
      const { detector } = detectorFor(t);
      const hostId = "builder-1";
      await registerHost(t.storage, {
        id: hostId,
        vcpus: 8,
        memoryBytes: 2 ** 34,
        isolation: "sandbox",
        now: t.clock.now(),
      });
      await detector.runOnce();
      assert.deepEqual((await op.get("/operator/api/anomalies/platform")).json(), [], "a healthy host raises nothing");

      const operation = "init-builder-1-1";
      const started = await t.storage.transaction((trx) =>
        startHostInitialization(trx, {
          operation,
          hostId,
          toolchains: ["stable"],
          steps: pendingLedger(),
          expectedRevision: null,
          note: null,
          actor: "operator",
          action: "initialization.start",
          now: t.clock.now(),
          rowLocks: t.storage.capabilities.rowLocks,
        }),
      );
      assert.equal(started.kind, "started");
      const at = t.clock.now().toISOString();
      const report = ledgerOfReport([
        { step: "sandbox_user", state: "succeeded", startedAt: at, finishedAt: at, detail: "" },
        { step: "bubblewrap", state: "failed", startedAt: at, finishedAt: at, detail: "bwrap: not found" },
        { step: "cgroup_delegation", state: "skipped", startedAt: null, finishedAt: null, detail: "" },
        { step: "toolchains", state: "skipped", startedAt: null, finishedAt: null, detail: "" },
      ]);
      assert.equal(report.state, "failed");
      const reported = await t.storage.transaction((trx) =>
        reportHostInitialization(trx, {
          hostId,
          operation,
          state: report.state,
          steps: report.steps,
          failure: report.failure,
          receiptId: "rcpt-init-1",
          now: t.clock.now(),
        }),
      );
      assert.equal(reported, "accepted");

      await detector.runOnce();
      const anomalies = (await op.get("/operator/api/anomalies/platform")).json() as {
        host: string;
        kind: string;
        evidence: { detail: string; reference?: string }[];
      }[];
      assert.deepEqual(
        anomalies.map((a) => [a.host, a.kind]),
        [[hostId, "initialization_failed"]],
      );
      assert.equal(anomalies[0]?.evidence[0]?.reference, `initialization:${operation}`);
      assert.match(anomalies[0]?.evidence[0]?.detail ?? "", /bubblewrap failed: bwrap: not found/);
      const recovery = (await op.get(`/operator/api/hosts/${hostId}/recovery`)).json();
      assert.equal(recovery.admission.open, false);
      assert.ok(recovery.incident !== null);

      await detector.runOnce();
      assert.equal(
        ((await op.get("/operator/api/anomalies/platform")).json() as unknown[]).length,
        1,
        "a persisting failure is not raised again",
      );
    });
  });
}
