import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  HOST_ACTIVATION_PLAN,
  hostActivationOperationOf,
  listHostActivations,
  readHostOperationState,
  recordHostOperatorReadiness,
  registerHost,
  type Storage,
} from "../src/index.js";
import { DIALECTS, type TestDatabase } from "./dialects.js";

/**
 * The host operator's activations as storage keeps them (host-recovery/record-host-activation.ts,
 * list-host-activations.ts): each readiness report records the start it came from, with its
 * ledger and receipt, in the same transaction; a retried report of one start rewrites that
 * activation rather than adding one; the list is most recently written first, filtered by
 * operation on request, and reading it mutates nothing.
 */
const T0 = new Date("2026-11-22T07:00:00.000Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

const readiness = (boot: string, startedAt: string, over: { bindingLoaded?: boolean } = {}) => ({
  instance: "operator-1",
  startedAt,
  environment: "production",
  hostReported: "host-a",
  provisioningBundleSha256: "a".repeat(64),
  recoveryBindingLoaded: over.bindingLoaded ?? true,
  installation: "inst-1",
  providerIdentityReadable: true,
  provider: "bare-metal",
  providerServiceName: "kiln-host",
  boot,
});

for (const dialect of DIALECTS) {
  describe(`host activations [${dialect.name}]`, { skip: dialect.skip }, () => {
    async function withHost(test: (storage: Storage) => Promise<void>) {
      const database: TestDatabase = await dialect.createDatabase();
      const storage = await database.open({ maxConnections: 2 });
      try {
        await registerHost(storage, { id: "host-a", vcpus: 8, memoryBytes: 2 ** 34, isolation: "sandbox", now: T0 });
        await test(storage);
      } finally {
        await storage.close();
        await database.dispose();
      }
    }

    it("records one activation per start, newest first, with its ledger and receipt", () =>
      withHost(async (storage) => {
        const first = await recordHostOperatorReadiness(storage, {
          hostId: "host-a",
          readiness: readiness("boot-1", at(0).toISOString()),
          activationSteps: [
            {
              step: "load_provisioning_bundle",
              state: "succeeded",
              startedAt: at(0).toISOString(),
              finishedAt: at(0).toISOString(),
              detail: null,
            },
          ],
          now: at(1),
        });
        // A report from a host operator that sends no ledger: derived from its readiness.
        const second = await recordHostOperatorReadiness(storage, {
          hostId: "host-a",
          readiness: readiness("boot-2", at(10).toISOString(), { bindingLoaded: false }),
          now: at(11),
        });
        assert.notEqual(first, second);
        assert.equal(
          first,
          hostActivationOperationOf({
            hostId: "host-a",
            boot: "boot-1",
            instance: "operator-1",
            startedAt: at(0).toISOString(),
          }),
        );
        assert.match(first, /^[a-z0-9][a-z0-9-]{0,62}$/);

        const listed = await listHostActivations(storage, { hostId: "host-a" });
        assert.deepEqual(
          listed.map((a) => [a.operation, a.boot]),
          [
            [second, "boot-2"],
            [first, "boot-1"],
          ],
        );
        const [newest, oldest] = listed;
        assert.ok(newest !== undefined && oldest !== undefined);
        assert.deepEqual(newest.plan, [...HOST_ACTIVATION_PLAN]);
        assert.deepEqual(
          newest.steps.map((s) => [s.step, s.state]),
          [
            ["load_provisioning_bundle", "succeeded"],
            ["load_recovery_binding", "failed"],
            ["check_provider_identity", "skipped"],
            ["record_readiness", "succeeded"],
          ],
        );
        assert.deepEqual(newest.receipt, {
          outcome: "failed",
          finishedAt: at(11).toISOString(),
          detail: "load_recovery_binding: no recovery binding loaded",
        });
        assert.deepEqual(
          oldest.steps.map((s) => [s.step, s.state]),
          [
            ["load_provisioning_bundle", "succeeded"],
            ["record_readiness", "succeeded"],
          ],
        );
        assert.deepEqual(oldest.receipt, { outcome: "succeeded", finishedAt: at(1).toISOString(), detail: null });
        // The readiness row and the boot holding authority are the newest start's.
        assert.equal((await readHostOperationState(storage, "host-a"))?.readiness?.boot, "boot-2");

        // Filtered by operation: only that one; an operation the host has none of: empty.
        assert.deepEqual(
          (await listHostActivations(storage, { hostId: "host-a", operation: first })).map((a) => a.operation),
          [first],
        );
        assert.deepEqual(await listHostActivations(storage, { hostId: "host-a", operation: "activation-none" }), []);
        assert.deepEqual(await listHostActivations(storage, { hostId: "host-b", operation: first }), []);
      }));

    it("a retried report of the same start rewrites its activation rather than adding one", () =>
      withHost(async (storage) => {
        const report = (now: Date) =>
          recordHostOperatorReadiness(storage, {
            hostId: "host-a",
            readiness: readiness("boot-1", at(0).toISOString()),
            now,
          });
        const once = await report(at(1));
        const again = await report(at(5));
        assert.equal(once, again);
        const listed = await listHostActivations(storage, { hostId: "host-a" });
        assert.equal(listed.length, 1);
        assert.equal(listed[0]?.writtenAt, at(5).toISOString());
        const rows = await storage.db.selectFrom("host_activations").selectAll().execute();
        assert.deepEqual(await listHostActivations(storage, { hostId: "host-a" }), listed);
        assert.deepEqual(await storage.db.selectFrom("host_activations").selectAll().execute(), rows);
      }));
  });
}
