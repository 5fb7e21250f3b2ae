import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  BareMetalClient,
  BareMetalRecoveryProvider,
  httpHostOperatorClient,
  LocalRecoveryProvider,
  ProcessSupervisor,
} from "@kiln/host";
import { claimNextJob, createTenant, registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { MAX_AUTOMATIC_RECOVERIES } from "../src/domain/hosts/impairment/impairment-detector.js";
import { VCPUS_OF_SIZE } from "../src/domain/policy/platform-limits.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { acceptJob } from "../src/testing/job-fixtures.js";
import { BareMetalSimulator } from "./bare-metal-simulator.js";
import {
  confirmationFor,
  detectorFor,
  enrolledHost,
  hostOperatorFor,
  listeningOrigin,
  operatorSession,
  READY_SERVICE_ARGS,
} from "./host-recovery-fixtures.js";

/**
 * Host impairment, incidents and recovery (issue 18 items 2–5) through the operator API and the
 * host protocol over HTTP, on real storage of each dialect, each test on a fresh app: the
 * impairment detector (run once per pass, on the test's clock), a host operator running its
 * recoveries through a real provider — the `local` one supervising a real process, or the
 * bare-metal one against a local simulator of the provider's API — and one test per operator
 * rule 3–7, each quoting it.
 */

type Recovery = {
  admission: { open: boolean; closed_by: string | null; closure_reason: string | null };
  host_operation: { operation: string; revision: number };
  policy: { automatic: boolean; revision: number } | null;
  incident: {
    id: string;
    automatic_recoveries_spent: number;
    awaiting_operator: boolean;
    awaiting_reason: string | null;
  } | null;
  recovery: {
    operation: string;
    state: string;
    began_by: string;
    steps: {
      step: string;
      state: string;
      destructive: boolean;
      started_at: string | null;
      finished_at: string | null;
    }[];
  } | null;
  invocations: { request: string; operation: string; operator: string; surface: string }[];
};

for (const dialect of DIALECTS) {
  describe(`host recovery (${dialect.name})`, { skip: dialect.skip }, () => {
    /** A fresh app listening for its hosts, an operator session, a detector; closed by `done`. */
    async function world() {
      const t: TestApp = await testApp(await dialect.openFresh());
      const origin = await listeningOrigin(t);
      const op = await operatorSession(t);
      const { detector, events: detected } = detectorFor(t);
      const supervisors: ProcessSupervisor[] = [];
      const recoveryOf = async (hostId: string) => {
        const r = await op.get(`/operator/api/hosts/${hostId}/recovery`);
        assert.equal(r.statusCode, 200, r.body);
        return r.json() as Recovery;
      };
      /** A host the control plane knows, with its host operator on the local provider (a real process). */
      const localHost = async (hostId: string, command: readonly string[] = READY_SERVICE_ARGS) => {
        await registerHost(t.storage, {
          id: hostId,
          vcpus: 8,
          memoryBytes: 2 ** 34,
          isolation: "sandbox",
          now: t.clock.now(),
        });
        const identity = await enrolledHost(t, hostId);
        const supervisor = new ProcessSupervisor({
          serviceName: "kiln-host",
          command: process.execPath,
          args: command,
          env: {},
          ready: /health reported to the control plane/,
        });
        supervisors.push(supervisor);
        const dataDir = await mkdtemp(join(tmpdir(), "kiln-host-data-"));
        const provider = new LocalRecoveryProvider({ supervisor, dataDir });
        const { operator, events } = hostOperatorFor(t, { origin, identity, hostId, provider });
        await operator.runOnce(); // records its readiness: the host's boot authority
        return { operator, events, supervisor, identity };
      };
      /** The host asks for work (a real claim), which is its heartbeat; null when nothing placed. */
      const claim = (hostId: string) =>
        claimNextJob(t.storage, {
          hostId,
          freeVcpus: 8,
          vcpusOfSize: VCPUS_OF_SIZE,
          leaseSeconds: 60,
          now: t.clock.now(),
        });
      const setPolicy = async (hostId: string, automatic: boolean) => {
        const current = (await recoveryOf(hostId)).policy;
        const r = await op.post(`/operator/api/hosts/${hostId}/recovery/policy`, {
          automatic,
          ...(current === null ? {} : { expected_revision: current.revision }),
        });
        assert.equal(r.statusCode, 200, r.body);
      };
      /** The host goes silent past the heartbeat bound, and the detector runs once. */
      const silencePastBound = async () => {
        await t.clock.advance(120_000);
        await detector.runOnce();
      };
      const done = async () => {
        for (const s of supervisors) await s.stop();
        await t.close();
      };
      return { t, origin, op, detector, detected, recoveryOf, localHost, claim, setPolicy, silencePastBound, done };
    }

    it("rule 3: “Recovery invocation: requires the exact non-destructive confirmation; no step runs on the caller; a second invocation while a recovery of the host is open or running returns that operation; a retry with the same request identifier replays the recorded invocation; surface and operator are recorded. Reading a recovery or activations list mutates nothing; a host with no boot authority is `not_found` for activations.”", async () => {
      const w = await world();
      try {
        const hostId = "rule3";
        await registerHost(w.t.storage, {
          id: "no-operator",
          vcpus: 8,
          memoryBytes: 2 ** 34,
          isolation: "sandbox",
          now: w.t.clock.now(),
        });
        const noAuthority = await w.op.get("/operator/api/hosts/no-operator/activations");
        assert.equal(noAuthority.statusCode, 404, noAuthority.body);
        assert.equal(noAuthority.json().code, "not_found");
        assert.equal((await w.op.get("/operator/api/hosts/nowhere/recovery")).json().code, "not_found");

        const host = await w.localHost(hostId);
        const before = await w.recoveryOf(hostId);
        const revision = before.host_operation.revision;
        const invoke = (body: object, id = hostId) => w.op.post(`/operator/api/hosts/${id}/recovery`, body);
        const exact = confirmationFor("kiln-host");

        const wrong = await invoke({
          confirmation: confirmationFor("other-service"),
          expected_revision: revision,
          request: "r1",
        });
        assert.equal(wrong.statusCode, 400, wrong.body);
        assert.equal(wrong.json().code, "invalid_request");
        assert.equal(
          (await invoke({ confirmation: "recover-boot:kiln-host", expected_revision: revision, request: "r1" })).json()
            .code,
          "invalid_request",
        );
        assert.equal((await invoke({ confirmation: exact, request: "r1" })).json().code, "invalid_request");
        const stale = await invoke({ confirmation: exact, expected_revision: revision + 5, request: "r1" });
        assert.equal(stale.statusCode, 409, stale.body);
        assert.equal(stale.json().code, "conflict");
        assert.equal(
          (await invoke({ confirmation: exact, expected_revision: 0, request: "r1" }, "nowhere")).json().code,
          "not_found",
        );
        assert.equal(
          (
            await invoke({ confirmation: exact, expected_revision: revision, request: "r1", incident: "inc-none" })
          ).json().code,
          "not_found",
        );

        const recorded = await invoke({
          confirmation: exact,
          expected_revision: revision,
          request: "r1",
          surface: "command_line",
        });
        assert.equal(recorded.statusCode, 200, recorded.body);
        assert.equal(recorded.json().outcome, "recorded");
        const operation = recorded.json().operation as string;

        // No step runs on the caller: the invocation only recorded the recovery.
        assert.equal(host.supervisor.running(), false, "the supervised service was not started by the invocation");
        const open = await w.recoveryOf(hostId);
        assert.equal(open.recovery?.operation, operation);
        assert.equal(open.recovery?.state, "recorded");
        assert.deepEqual(open.recovery?.steps, []);
        assert.equal(open.invocations[0]?.surface, "command_line");
        assert.ok((open.invocations[0]?.operator ?? "").length > 0, "the operator is recorded");

        const second = await invoke({
          confirmation: exact,
          expected_revision: open.host_operation.revision,
          request: "r2",
        });
        assert.equal(second.statusCode, 200, second.body);
        assert.deepEqual(second.json(), { outcome: "in_progress", operation, state: "open" });
        const replay = await invoke({
          confirmation: exact,
          expected_revision: revision,
          request: "r1",
          surface: "command_line",
        });
        assert.equal(replay.json().outcome, "recorded");
        assert.equal(replay.json().operation, operation);

        // Reading mutates nothing: the same document twice, and no audit entry for reads.
        const auditBefore = (await w.op.audit()).length;
        assert.deepEqual(await w.recoveryOf(hostId), await w.recoveryOf(hostId));
        const activationsA = await w.op.get(`/operator/api/hosts/${hostId}/activations`);
        const activationsB = await w.op.get(`/operator/api/hosts/${hostId}/activations`);
        assert.equal(activationsA.statusCode, 200, activationsA.body);
        assert.deepEqual(activationsA.json(), activationsB.json());
        assert.equal((await w.op.audit()).length, auditBefore);
        const activations = activationsA.json();
        assert.equal(activations.readiness.provider_identity_readable, true);
        assert.equal(activations.readiness.recovery_binding_loaded, true);
        assert.equal(activations.boot_authority.boot, `boot-${hostId}-1`);
        assert.equal(activations.activations[0].receipt.outcome, "succeeded");

        // The host operator, on the host's side, runs it; each step's start, end and outcome are in the ledger.
        await host.operator.runOnce();
        assert.equal(host.supervisor.running(), true);
        const ran = await w.recoveryOf(hostId);
        assert.equal(ran.recovery?.state, "succeeded");
        assert.deepEqual(
          ran.recovery?.steps.map((s) => [s.step, s.state]),
          [
            ["restart_service", "succeeded"],
            ["clear_scratch", "succeeded"],
            ["rerun_initialization", "succeeded"],
          ],
        );
        for (const step of ran.recovery?.steps ?? []) assert.ok(step.started_at !== null && step.finished_at !== null);

        const invocationsAudited = (await w.op.audit()).filter((e) => e.operation === "operator.hosts.recovery.invoke");
        assert.deepEqual(
          invocationsAudited.map((e) => e.outcome).sort(),
          ["conflict", "in_progress", "performed", "replayed"].sort(),
        );
      } finally {
        await w.done();
      }
    });

    it("rule 4: “Recovery policy: a host whose policy disables automatic recovery still has admission closed and an incident opened on an impairment, and takes no further automatic action.”", async () => {
      const w = await world();
      try {
        const hostId = "rule4";
        const host = await w.localHost(hostId);
        await w.setPolicy(hostId, false);
        await createTenant(w.t.storage, { id: "acme-rule4" }, w.t.clock.now());
        assert.equal(await w.claim(hostId), undefined); // its heartbeat; nothing queued yet
        await w.silencePastBound();

        const impaired = await w.recoveryOf(hostId);
        assert.equal(impaired.admission.open, false);
        assert.equal(impaired.admission.closed_by, "platform");
        assert.match(impaired.admission.closure_reason ?? "", /host_unresponsive: no heartbeat for 120 s/);
        assert.ok(impaired.incident !== null);
        assert.equal(impaired.incident.awaiting_operator, true);
        assert.match(impaired.incident.awaiting_reason ?? "", /automatic recovery is off/);
        const anomalies = (await w.op.get("/operator/api/anomalies/platform")).json() as {
          kind: string;
          host: string;
        }[];
        assert.deepEqual(
          anomalies.map((a) => [a.kind, a.host]),
          [["host_unresponsive", hostId]],
        );

        // Admission closed: a queued job is not placed on it.
        const job = await acceptJob(w.t.storage, { tenant: "acme-rule4", now: w.t.clock.now() });
        assert.equal(await w.claim(hostId), undefined);

        // Nothing further happens automatically, however often the loops run.
        await w.detector.runOnce();
        await host.operator.runOnce();
        await w.detector.runOnce();
        assert.deepEqual((await w.recoveryOf(hostId)).invocations, []);
        assert.equal(host.events.filter((e) => e.type === "recovery:claimed").length, 0);
        assert.equal(w.detected.filter((e) => e.type === "recovery:automatic").length, 0);

        // Until an operator invokes: the host operator runs it, the host speaks again, admission reopens.
        const state = await w.recoveryOf(hostId);
        const invoked = await w.op.post(`/operator/api/hosts/${hostId}/recovery`, {
          confirmation: confirmationFor("kiln-host"),
          expected_revision: state.host_operation.revision,
          request: "operator-1",
        });
        assert.equal(invoked.json().outcome, "recorded", invoked.body);
        await host.operator.runOnce();
        assert.equal((await w.recoveryOf(hostId)).recovery?.state, "succeeded");
        assert.equal(await w.claim(hostId), undefined, "still closed until the detector sees it back");
        await w.detector.runOnce();
        assert.equal((await w.recoveryOf(hostId)).admission.open, true);
        assert.equal((await w.claim(hostId))?.job.id, job.id);
      } finally {
        await w.done();
      }
    });

    it("rule 5: “No destructive step is automatic; each waits for an approval naming host, incident and step.”", async () => {
      const w = await world();
      const simulator = new BareMetalSimulator("robot-user:robot-secret");
      try {
        const hostId = "rule5";
        simulator.addServer("4711", { wedged: true });
        const endpoint = await simulator.start();
        await registerHost(w.t.storage, {
          id: hostId,
          vcpus: 8,
          memoryBytes: 2 ** 34,
          isolation: "sandbox",
          now: w.t.clock.now(),
        });
        const identity = await enrolledHost(w.t, hostId);
        const client = new BareMetalClient({ endpoint, credential: async () => "robot-user:robot-secret" });
        const provider = new BareMetalRecoveryProvider({
          client,
          server: "4711",
          serviceName: "kiln-host",
          installation: "server 4711",
          dist: "Debian 12 base",
          identityReadable: async () => true,
          hostCameBack: async () => (await client.status("4711")) === "ready",
        });
        const { operator, events } = hostOperatorFor(w.t, { origin: w.origin, identity, hostId, provider });
        await operator.runOnce();
        await w.setPolicy(hostId, true);
        await w.claim(hostId);
        await w.silencePastBound();
        assert.equal(w.detected.filter((e) => e.type === "recovery:automatic").length, 1);
        const automatic = await w.recoveryOf(hostId);
        assert.equal(automatic.invocations[0]?.surface, "automatic");
        const incident = automatic.incident?.id ?? "";

        await operator.runOnce();
        const waiting = await w.recoveryOf(hostId);
        assert.deepEqual(
          waiting.recovery?.steps.map((s) => [s.step, s.state, s.destructive]),
          [
            ["reset", "succeeded", false],
            ["await_host", "failed", false],
            ["reinstallation", "awaiting_approval", true],
          ],
        );
        assert.equal(waiting.recovery?.state, "running");
        assert.equal(waiting.incident?.awaiting_operator, true);
        assert.match(
          waiting.incident?.awaiting_reason ?? "",
          /destructive step reinstallation awaits an approval naming host, incident and step/,
        );
        assert.deepEqual(
          events.filter((e) => e.type === "recovery:awaiting_approval").map((e) => e.type),
          ["recovery:awaiting_approval"],
        );
        const armedReinstall = () => simulator.calls.filter((c) => c.path === "/boot/4711/linux").length;
        assert.equal(armedReinstall(), 0);
        await operator.runOnce(); // asking again changes nothing while no approval names it
        assert.equal(armedReinstall(), 0);

        const approve = (body: object, incidentId = incident, id = hostId) =>
          w.op.post(`/operator/api/hosts/${id}/incidents/${incidentId}/approvals`, body);
        assert.equal((await approve({ step: "format_everything" })).json().code, "invalid_request");
        assert.equal((await approve({ step: "reinstallation" }, "inc-0000")).json().code, "not_found");
        assert.equal((await approve({ step: "reinstallation" }, incident, "other-host")).json().code, "not_found");
        // An approval of another destructive step does not let this one run.
        assert.equal((await approve({ step: "partitioning" })).statusCode, 200);
        await operator.runOnce();
        assert.equal(armedReinstall(), 0);

        const approved = await approve({ step: "reinstallation" });
        assert.equal(approved.statusCode, 200, approved.body);
        assert.deepEqual(
          { host: approved.json().host, incident: approved.json().incident, step: approved.json().step },
          { host: hostId, incident, step: "reinstallation" },
        );
        await operator.runOnce();
        assert.equal(armedReinstall(), 1);
        const done = await w.recoveryOf(hostId);
        assert.equal(done.recovery?.state, "succeeded");
        assert.equal(done.recovery?.steps.at(-1)?.state, "succeeded");
        assert.equal(await client.status("4711"), "ready");
      } finally {
        await simulator.stop();
        await w.done();
      }
    });

    it("rule 6: “Incident close leaves admission as it stands.” — and a later impairment opens a new incident", async () => {
      const w = await world();
      try {
        const hostId = "rule6";
        const host = await w.localHost(hostId);
        await w.setPolicy(hostId, false);
        await w.claim(hostId);
        await w.silencePastBound();
        const impaired = await w.recoveryOf(hostId);
        const first = impaired.incident?.id ?? "";
        assert.equal(impaired.admission.open, false);

        const incident = await w.op.get(`/operator/api/hosts/${hostId}/recovery`);
        const revision = (incident.json().incident.detail as { revision: number }).revision;
        const close = (body: object, id = first) =>
          w.op.post(`/operator/api/hosts/${hostId}/incidents/${id}/close`, body);
        assert.equal((await close({ expected_revision: revision + 1 })).json().code, "conflict");
        assert.equal((await close({ expected_revision: revision }, "inc-0000")).json().code, "not_found");
        assert.equal((await close({})).json().code, "invalid_request");
        const closed = await close({ expected_revision: revision });
        assert.equal(closed.statusCode, 200, closed.body);
        assert.equal(closed.json().state, "closed");
        assert.equal((await close({ expected_revision: closed.json().revision })).json().code, "conflict");

        const after = await w.recoveryOf(hostId);
        assert.equal(after.admission.open, false, "admission stays closed as it stood");
        assert.equal(after.incident, null);

        await w.detector.runOnce(); // the host is still silent: a later impairment
        const again = await w.recoveryOf(hostId);
        assert.ok(again.incident !== null);
        assert.notEqual(again.incident.id, first);
        assert.equal(again.admission.open, false);

        // Closed again, admission still stands closed; an operator's recovery (naming no incident)
        // brings the host back, and the detector then reopens admission.
        const secondRevision = (
          (await w.op.get(`/operator/api/hosts/${hostId}/recovery`)).json().incident.detail as { revision: number }
        ).revision;
        assert.equal((await close({ expected_revision: secondRevision }, again.incident.id)).statusCode, 200);
        const invoked = await w.op.post(`/operator/api/hosts/${hostId}/recovery`, {
          confirmation: confirmationFor("kiln-host"),
          expected_revision: (await w.recoveryOf(hostId)).host_operation.revision,
          request: "after-close",
        });
        assert.equal(invoked.json().outcome, "recorded", invoked.body);
        await host.operator.runOnce();
        await w.claim(hostId); // the host speaks again
        await w.detector.runOnce();
        const reopened = await w.recoveryOf(hostId);
        assert.equal(reopened.admission.open, true);
        assert.equal(reopened.incident, null, "no impairment remained, so no new incident");
      } finally {
        await w.done();
      }
    });

    it("rule 7: “Platform anomaly disposition changes no job, attempt, host or admission.”", async () => {
      const w = await world();
      try {
        const hostId = "rule7";
        await w.localHost(hostId);
        await createTenant(w.t.storage, { id: "acme-rule7" }, w.t.clock.now());
        await acceptJob(w.t.storage, { tenant: "acme-rule7", now: w.t.clock.now() });
        await w.claim(hostId); // places the job: a running attempt on the host
        await w.silencePastBound();
        const snapshot = async () => ({
          hosts: await w.t.storage.db.selectFrom("hosts").selectAll().where("id", "=", hostId).execute(),
          jobs: await w.t.storage.db.selectFrom("jobs").selectAll().execute(),
          attempts: await w.t.storage.db.selectFrom("attempts").selectAll().execute(),
          incidents: await w.t.storage.db.selectFrom("host_incidents").selectAll().execute(),
        });
        const [anomaly] = (await w.op.get("/operator/api/anomalies/platform")).json() as {
          id: string;
          recovery: { confirmation: string } | null;
          evidence: { kind: string }[];
        }[];
        assert.ok(anomaly !== undefined);
        assert.equal(anomaly.recovery?.confirmation, confirmationFor("kiln-host"));
        assert.deepEqual(
          anomaly.evidence.map((e) => e.kind),
          ["missed_heartbeats"],
        );
        const before = await snapshot();
        assert.equal(before.attempts.length, 1);

        const url = `/operator/api/anomalies/platform/${anomaly.id}/disposition`;
        assert.equal((await w.op.post(url, { disposition: "fixed" })).json().code, "invalid_request");
        assert.equal(
          (await w.op.post("/operator/api/anomalies/platform/pa-0000/disposition", { disposition: "confirmed" })).json()
            .code,
          "operator_not_found",
        );
        const disposed = await w.op.post(url, { disposition: "confirmed", note: "the host really stopped" });
        assert.equal(disposed.statusCode, 200, disposed.body);
        assert.equal(disposed.json().disposition.disposition, "confirmed");
        assert.equal(disposed.json().disposition.note, "the host really stopped");
        assert.deepEqual(await snapshot(), before);
        const audited = (await w.op.audit()).filter((e) => e.operation === "operator.anomalies.platform.disposition");
        assert.equal(audited.length, 1);
      } finally {
        await w.done();
      }
    });

    it("a host too busy to claim is not unresponsive while its attempts' leases are renewed", async () => {
      const w = await world();
      try {
        const hostId = "busy";
        await w.localHost(hostId);
        await createTenant(w.t.storage, { id: "acme-busy" }, w.t.clock.now());
        await acceptJob(w.t.storage, { tenant: "acme-busy", now: w.t.clock.now() });
        const placed = await claimNextJob(w.t.storage, {
          hostId,
          freeVcpus: 8,
          vcpusOfSize: VCPUS_OF_SIZE,
          leaseSeconds: 600, // as renewed by its attempt heartbeats
          now: w.t.clock.now(),
        });
        assert.ok(placed !== undefined);
        await w.silencePastBound();
        assert.deepEqual((await w.op.get("/operator/api/anomalies/platform")).json(), []);
        assert.equal((await w.recoveryOf(hostId)).admission.open, true);
        await w.t.clock.advance(600_000); // the lease lapses unrenewed: now it is silent
        await w.detector.runOnce();
        assert.equal((await w.recoveryOf(hostId)).admission.open, false);
      } finally {
        await w.done();
      }
    });

    it("a disk filling, reported by the host over the host protocol, is a platform anomaly that closes admission", async () => {
      const w = await world();
      try {
        const hostId = "disk";
        const host = await w.localHost(hostId);
        const client = httpHostOperatorClient({ endpoint: w.origin, identity: host.identity });
        await assert.rejects(
          client.health({
            hostId: "someone-else",
            diskFreeBytes: 1,
            diskTotalBytes: 100,
            failedInitializationStep: null,
          }),
          /invalid_request/,
        );
        await client.health({
          hostId,
          diskFreeBytes: 2 * 2 ** 20,
          diskTotalBytes: 100 * 2 ** 30,
          failedInitializationStep: null,
        });
        await w.detector.runOnce();
        const anomalies = (await w.op.get("/operator/api/anomalies/platform")).json() as {
          kind: string;
          evidence: { detail: string }[];
        }[];
        assert.deepEqual(
          anomalies.map((a) => a.kind),
          ["disk_filling"],
        );
        assert.match(anomalies[0]?.evidence[0]?.detail ?? "", /2097152 of 107374182400 bytes free/);
        assert.equal((await w.recoveryOf(hostId)).admission.open, false);
      } finally {
        await w.done();
      }
    });

    it(`an incident spends at most ${MAX_AUTOMATIC_RECOVERIES} automatic recoveries, then awaits an operator saying why`, async () => {
      const w = await world();
      try {
        const hostId = "spent";
        // The supervised service exits at once: every restart fails, so every recovery fails.
        const host = await w.localHost(hostId, ["-e", "process.exit(3)"]);
        await w.setPolicy(hostId, true);
        await w.claim(hostId);
        await w.silencePastBound();
        for (let i = 0; i < MAX_AUTOMATIC_RECOVERIES; i++) {
          await host.operator.runOnce();
          await w.detector.runOnce();
        }
        const state = await w.recoveryOf(hostId);
        assert.equal(state.invocations.length, MAX_AUTOMATIC_RECOVERIES);
        assert.ok(state.invocations.every((i) => i.surface === "automatic"));
        assert.equal(state.recovery?.state, "failed");
        assert.equal(state.recovery?.steps[0]?.state, "failed");
        assert.equal(state.incident?.automatic_recoveries_spent, MAX_AUTOMATIC_RECOVERIES);
        assert.equal(state.incident?.awaiting_operator, true);
        assert.match(state.incident?.awaiting_reason ?? "", /automatic recoveries spent \(2 of 2\)/);
        await w.detector.runOnce();
        assert.equal((await w.recoveryOf(hostId)).invocations.length, MAX_AUTOMATIC_RECOVERIES);
      } finally {
        await w.done();
      }
    });

    it("recovery policy: set without a revision only while none is set, then at the revision read", async () => {
      const w = await world();
      try {
        await registerHost(w.t.storage, {
          id: "policy",
          vcpus: 8,
          memoryBytes: 2 ** 34,
          isolation: "sandbox",
          now: w.t.clock.now(),
        });
        const set = (body: object, id = "policy") => w.op.post(`/operator/api/hosts/${id}/recovery/policy`, body);
        assert.equal((await set({ automatic: true }, "nowhere")).json().code, "not_found");
        assert.equal((await set({ automatic: true, expected_revision: 0 })).json().code, "conflict");
        const first = await set({ automatic: true });
        assert.equal(first.statusCode, 200, first.body);
        assert.equal(first.json().revision, 1);
        assert.equal((await set({ automatic: false })).json().code, "conflict");
        assert.equal((await set({ automatic: false, expected_revision: 0 })).json().code, "conflict");
        const second = await set({ automatic: false, expected_revision: 1 });
        assert.deepEqual([second.json().automatic, second.json().revision], [false, 2]);
        assert.equal((await set({ automatic: "yes" })).json().code, "invalid_request");
      } finally {
        await w.done();
      }
    });
  });
}
