import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  approveDestructiveStep,
  beginHostRecoveryStep,
  claimHostRecovery,
  claimNextJob,
  closeHostIncident,
  type HostRecoveryInvocationInput,
  insertJob,
  invokeHostRecovery,
  raiseHostImpairment,
  readHostOperationState,
  recordHostRecoveryPlan,
  reopenHostAdmission,
  type Storage,
} from "../src/index.js";
import { queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";
import { blockedOrSettled, deferred, withTenantAndHosts } from "./staged-transactions.js";

/**
 * Host impairment and recovery as storage enforces them (host-incidents/, host-recovery/,
 * claim-next-job.ts): an impairment closes admission apart from drain and the claim verb
 * places nothing on such a host; invocations replay, return the open one, or conflict, and two
 * racing ones are ordered — staged with one transaction held open, never by timing; a
 * destructive step begins only with an approval naming host, incident and step.
 */
const T0 = new Date("2026-11-22T07:00:00.000Z");
const TENANT = "acme";
const SIZE = "kiln2-cpu";
const NO_HANG = { timeout: 30 * 60_000 };
let submissions = 0;

for (const dialect of DIALECTS) {
  describe(`host recovery [${dialect.name}]`, { skip: dialect.skip }, () => {
    const withHost = (test: (main: Storage, other: Storage) => Promise<void>) =>
      withTenantAndHosts(dialect, { tenant: TENANT, hosts: ["host-a"], now: T0 }, test);
    const impair = (storage: Storage, kind = "host_unresponsive") =>
      storage.transaction((trx) =>
        raiseHostImpairment(
          trx,
          { hostId: "host-a", kind, evidence: [{ kind: "missed_heartbeats", detail: "silent" }], now: T0 },
          storage.capabilities.rowLocks,
        ),
      );
    const invocation = (over: Partial<HostRecoveryInvocationInput> = {}): HostRecoveryInvocationInput => ({
      hostId: "host-a",
      incidentId: null,
      request: "req-1",
      surface: "operator_api",
      operator: "op",
      rescueRead: false,
      rescueSshPublicKey: null,
      expectedRevision: 0,
      automatic: false,
      now: T0,
      ...over,
    });
    const invoke = (storage: Storage, over: Partial<HostRecoveryInvocationInput> = {}) =>
      storage.transaction((trx) => invokeHostRecovery(trx, invocation(over), storage.capabilities.rowLocks));

    it("an impairment closes admission (not a drain); the claim verb places nothing until it reopens", async () => {
      await withHost(async (storage) => {
        const job = await enqueue(storage);
        const raised = await impair(storage);
        assert.equal(raised.kind === "raised" && raised.incidentOpened && raised.admissionClosed, true);
        assert.equal(await claim(storage), undefined);
        const host = await storage.db.selectFrom("hosts").select(["state", "drained_by"]).executeTakeFirstOrThrow();
        assert.deepEqual(host, { state: "serving", drained_by: null }, "drain and its attribution untouched");
        const again = await impair(storage);
        assert.equal(again.kind === "raised" && again.anomalyId === null && !again.incidentOpened, true);
        assert.equal(await reopenHostAdmission(storage, { hostId: "host-a" }), true);
        assert.equal((await claim(storage))?.job.id, job);
      });
    });

    it("invocation: records, replays its request, returns the open one, conflicts on a moved revision", async () => {
      await withHost(async (storage) => {
        assert.deepEqual(await invoke(storage, { hostId: "nowhere" }), { kind: "not_found", what: "host" });
        assert.deepEqual(await invoke(storage, { incidentId: "inc-x" }), { kind: "not_found", what: "incident" });
        const first = await invoke(storage);
        assert.equal(first.kind, "recorded");
        const id = first.kind === "recorded" ? first.recovery.id : "";
        const replay = await invoke(storage, { expectedRevision: 99 });
        assert.equal(replay.kind === "replayed" && replay.recovery.id, id);
        const second = await invoke(storage, { request: "req-2", expectedRevision: 99 });
        assert.equal(second.kind === "in_progress" && second.recovery.id, id);
        const claimed = await claimHostRecovery(storage, { hostId: "host-a", instance: "op-1", now: T0 });
        assert.equal(claimed?.state, "running");
        assert.equal((await invoke(storage, { request: "req-3" })).kind, "in_progress");
        await storage.db.updateTable("host_recoveries").set({ state: "succeeded" }).execute();
        assert.deepEqual(await invoke(storage, { request: "req-4", expectedRevision: 0 }), {
          kind: "conflict",
          operationRevision: 1,
        });
      });
    });

    it("two racing invocations are ordered: the second sees the first's open recovery", NO_HANG, async () => {
      await withHost(async (main, other) => {
        const reached = deferred();
        const gate = deferred();
        const first = main.transaction(async (trx) => {
          const r = await invokeHostRecovery(trx, invocation(), main.capabilities.rowLocks);
          reached.resolve();
          await gate.promise;
          return r;
        });
        await reached.promise;
        const second = invoke(other, { request: "req-2" });
        assert.equal(await blockedOrSettled(main, second), "pending", "the second waits for the first");
        gate.resolve();
        const recorded = await first;
        const answered = await second;
        assert.equal(recorded.kind, "recorded");
        assert.equal(answered.kind, "in_progress");
        assert.equal(
          answered.kind === "in_progress" &&
            recorded.kind === "recorded" &&
            answered.recovery.id === recorded.recovery.id,
          true,
        );
      });
    });

    it("a destructive step begins only with an approval naming host, incident and step; close leaves admission", async () => {
      await withHost(async (storage) => {
        const raised = await impair(storage);
        assert.equal(raised.kind, "raised");
        const incidentId = raised.kind === "raised" ? raised.incidentId : "";
        const state = await readHostOperationState(storage, "host-a");
        const recorded = await invoke(storage, { expectedRevision: state?.operationRevision ?? -1 });
        assert.equal(recorded.kind, "recorded");
        const recovery = await claimHostRecovery(storage, { hostId: "host-a", instance: "op-1", now: T0 });
        assert.ok(recovery !== undefined);
        assert.equal(recovery.incidentId, incidentId, "an invocation naming no incident answers the open one");
        await recordHostRecoveryPlan(storage, {
          hostId: "host-a",
          recoveryId: recovery.id,
          steps: ["reset", "reinstallation"],
        });
        const begin = (position: number) =>
          beginHostRecoveryStep(storage, { hostId: "host-a", recoveryId: recovery.id, position, now: T0 });
        assert.deepEqual(await begin(0), { kind: "proceed" });
        assert.equal((await begin(1)).kind, "await_approval");
        const approve = (step: string, incident = incidentId, hostId = "host-a") =>
          storage.transaction((trx) =>
            approveDestructiveStep(trx, { hostId, incidentId: incident, step, actor: "op", now: T0 }),
          );
        assert.deepEqual(await approve("reinstallation", incidentId, "host-b"), { kind: "not_found" });
        assert.equal((await approve("partitioning")).kind, "approved");
        assert.equal((await begin(1)).kind, "await_approval", "another step's approval does not count");
        assert.equal((await approve("reinstallation")).kind, "approved");
        assert.deepEqual(await begin(1), { kind: "proceed" });

        const incident = (await readHostOperationState(storage, "host-a"))?.openIncident;
        const close = (expectedRevision: number) =>
          storage.transaction((trx) =>
            closeHostIncident(trx, { hostId: "host-a", incidentId, expectedRevision, actor: "op", now: T0 }),
          );
        assert.equal((await close((incident?.revision ?? 0) + 1)).kind, "conflict");
        assert.deepEqual(await close(incident?.revision ?? -1), { kind: "closed" });
        const after = await readHostOperationState(storage, "host-a");
        assert.equal(after?.admission.open, false, "admission left as it stands");
        assert.equal(after?.openIncident, null);
        assert.equal((await approve("filesystem_operation")).kind, "conflict", "a closed incident takes no approval");
      });
    });
  });
}

async function enqueue(storage: Storage): Promise<string> {
  submissions += 1;
  const queuedAt = new Date(T0.getTime() - 1000 + submissions).toISOString();
  const { job } = await insertJob(
    storage,
    queuedJob({
      id: `job_recovery_${submissions}`,
      tenant: TENANT,
      submissionKey: `recovery-${submissions}`,
      requestHash: `hash-${submissions}`,
      queuedAt,
    }),
  );
  return job.id;
}

function claim(storage: Storage) {
  return claimNextJob(storage, {
    hostId: "host-a",
    freeVcpus: 64,
    vcpusOfSize: { [SIZE]: 2 },
    leaseSeconds: 60,
    now: T0,
  });
}
