import assert from "node:assert/strict";
import { access, mkdir, mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import {
  HEALTH_REPORTED_MESSAGE,
  HostTlsIdentity,
  LocalRecoveryProvider,
  ProcessSupervisor,
  tlsFilesIn,
} from "@kiln/host";
import { KILN_HOST_BIN } from "@kiln/host/testing";
import { DIALECTS } from "@kiln/storage/testing";
import { CanaryRunner } from "../src/domain/platform/canaries/canary-runner.js";
import { canarySettings } from "../src/domain/platform/canaries/canary-settings.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import {
  confirmationFor,
  detectorFor,
  enrolledHost,
  hostOperatorFor,
  listeningOrigin,
  operatorSession,
} from "./host-recovery-fixtures.js";

/** Canaries as the app judges them (the runner uses the same settings). */
const CANARIES = canarySettings({ intervalSeconds: 300, lateAfterSeconds: 240 });

/** A job's status once terminal (the safety deadline only keeps a hung run from hanging the suite). */
async function terminalStatusOf(t: TestApp, jobId: string): Promise<string> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const { status } = await t.storage.db
      .selectFrom("jobs")
      .select("status")
      .where("id", "=", jobId)
      .executeTakeFirstOrThrow();
    if (status === "passed" || status === "failed" || status === "cancelled") return status;
    assert.ok(Date.now() < deadline, `job ${jobId} still ${status}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The real `kiln-host` bin, as a host runs it. */

/**
 * A host made impaired for real: a listening control plane on real storage of each dialect, a
 * real `kiln-host` process (the package's bin, with its own client certificate, speaking HTTPS
 * with mutual TLS to the host listener; its host operator enrolled it, as kiln-host-operator does)
 * supervised by the host operator's `local` provider, and the kiln-host process stopped. Time
 * past the heartbeat bound moves on the test's clock and the detector runs once per pass; the
 * host operator runs in this process (as `kiln-host-operator` runs it beside the kiln-host) and
 * restarts the real process. Readiness of a restarted kiln-host is its own log line, written
 * once its first health report reached the control plane — an event, not a wait.
 */
for (const dialect of DIALECTS) {
  describe(`a real kiln-host made impaired (${dialect.name})`, { skip: dialect.skip }, () => {
    it("its process stopped: anomaly, incident, admission closed; policy on, the host operator brings it back and admission reopens; policy off, nothing until an operator invokes", async () => {
      const t = await testApp(await dialect.openFresh(), { canaries: CANARIES });
      const origin = await listeningOrigin(t);
      const op = await operatorSession(t);
      const { detector, events: detected } = detectorFor(t);
      const hostId = "metal-1";
      const identity = await enrolledHost(t, hostId);
      const dataDir = await mkdtemp(join(tmpdir(), "kiln-host-real-"));
      // The kiln-host finds the identity its host operator keeps in the shared data dir.
      await HostTlsIdentity.create(identity.material, tlsFilesIn(dataDir));
      const supervisor = new ProcessSupervisor({
        serviceName: "kiln-host",
        command: process.execPath,
        args: [KILN_HOST_BIN],
        env: {
          ...process.env,
          KILN_ENDPOINT: origin,
          KILN_HOST_DATA_DIR: dataDir,
          KILN_HOST_VCPUS: "2",
        },
        ready: new RegExp(HEALTH_REPORTED_MESSAGE),
      });
      try {
        const provider = new LocalRecoveryProvider({ supervisor, dataDir });
        const { operator } = hostOperatorFor(t, { origin, identity, hostId, provider });
        await supervisor.restart(); // the host operator starts its kiln-host, as kiln-host-operator does
        await operator.runOnce();
        const recovery = async () => (await op.get(`/operator/api/hosts/${hostId}/recovery`)).json();
        const anomalies = async () =>
          ((await op.get("/operator/api/anomalies/platform")).json() as { kind: string; host: string }[]).filter(
            (a) => a.host === hostId,
          );
        const setPolicy = async (automatic: boolean) => {
          const current = (await recovery()).policy as { revision: number } | null;
          const r = await op.post(`/operator/api/hosts/${hostId}/recovery/policy`, {
            automatic,
            ...(current === null ? {} : { expected_revision: current.revision }),
          });
          assert.equal(r.statusCode, 200, r.body);
        };

        // Healthy: it enrolled and reported; the detector finds nothing.
        await setPolicy(true);
        await detector.runOnce();
        assert.equal((await recovery()).admission.open, true);
        assert.deepEqual(await anomalies(), []);

        // Policy on. The kiln-host process stops (leaving a stale attempt directory behind).
        const stale = join(dataDir, "attempts", "stale-attempt");
        await mkdir(stale, { recursive: true });
        await supervisor.stop();
        assert.equal(supervisor.running(), false);
        await t.clock.advance(120_000);
        await detector.runOnce();
        const impaired = await recovery();
        assert.deepEqual(
          (await anomalies()).map((a) => a.kind),
          ["host_unresponsive"],
        );
        assert.equal(impaired.admission.open, false);
        assert.ok(impaired.incident !== null);
        assert.equal(impaired.recovery.state, "recorded");
        assert.equal(impaired.invocations[0].surface, "automatic");

        await operator.runOnce(); // on the host's side: restart, clear scratch, re-run initialization
        assert.equal(
          supervisor.running(),
          true,
          JSON.stringify({ recovery: (await recovery()).recovery, journal: supervisor.journal().slice(-15) }),
        );
        await assert.rejects(access(stale), /ENOENT/);
        const recovered = await recovery();
        assert.equal(recovered.recovery.state, "succeeded");
        assert.equal(recovered.admission.open, false, "admission reopens when the detector sees the host back");
        await detector.runOnce();
        assert.equal((await recovery()).admission.open, true);
        assert.deepEqual(
          detected.filter((e) => e.type === "admission:reopened").map((e) => e.hostId),
          [hostId],
        );

        // The host is back for real: a canary pinned to it runs there (real cargo in its
        // sandbox) and passes, and end-to-end workload health is ok again.
        const runner = new CanaryRunner({
          storage: t.storage,
          clock: t.clock,
          log: silentLogger,
          settings: CANARIES,
          app: t.app,
        });
        const pass = await runner.runOnce();
        assert.deepEqual(
          pass.submitted.map((c) => [c.host, c.error]),
          [[hostId, null]],
        );
        const canaryJob = pass.submitted[0]?.jobId;
        assert.ok(canaryJob);
        assert.equal(await terminalStatusOf(t, canaryJob), "passed", supervisor.journal().slice(-15).join("\n"));
        const attribution = (await op.get(`/operator/api/canaries/${canaryJob}/attribution`)).json();
        assert.equal(attribution.verdict, "passed");
        assert.equal(attribution.host, hostId);
        const states = (await op.get("/operator/api/platform/states")).json();
        assert.equal(states.end_to_end_workload_health.state, "ok", JSON.stringify(states.end_to_end_workload_health));

        // Policy off. The operator closes the first incident (admission stands open), the process stops again.
        await setPolicy(false);
        const first = (await recovery()).incident;
        const closed = await op.post(`/operator/api/hosts/${hostId}/incidents/${first.id}/close`, {
          expected_revision: first.detail.revision,
        });
        assert.equal(closed.statusCode, 200, closed.body);
        await supervisor.stop();
        await t.clock.advance(120_000);
        await detector.runOnce();
        const second = await recovery();
        assert.notEqual(second.incident.id, first.id, "a later impairment opens a new incident");
        assert.equal(second.admission.open, false);
        assert.match(second.incident.awaiting_reason, /automatic recovery is off/);
        const invocations = second.invocations.length;

        await operator.runOnce();
        await detector.runOnce();
        assert.equal(supervisor.running(), false, "nothing further happens automatically");
        assert.equal((await recovery()).invocations.length, invocations);

        const invoked = await op.post(`/operator/api/hosts/${hostId}/recovery`, {
          confirmation: confirmationFor("kiln-host"),
          expected_revision: second.host_operation.revision,
          request: "operator-after-policy-off",
          rescue_read: true,
        });
        assert.equal(invoked.json().outcome, "recorded", invoked.body);
        await operator.runOnce();
        const byOperator = await recovery();
        assert.equal(
          supervisor.running(),
          true,
          JSON.stringify({ recovery: byOperator.recovery, journal: supervisor.journal().slice(-15) }),
        );
        assert.deepEqual(
          byOperator.recovery.steps.map((s: { step: string; state: string }) => [s.step, s.state]),
          [
            ["read_journal", "succeeded"],
            ["restart_service", "succeeded"],
            ["clear_scratch", "succeeded"],
            ["rerun_initialization", "succeeded"],
          ],
        );
        assert.match(byOperator.recovery.steps[0].detail, /journal line\(s\) read/);
        await detector.runOnce();
        assert.equal((await recovery()).admission.open, true);
      } finally {
        await supervisor.stop();
        await t.close();
      }
    });
  });
}
