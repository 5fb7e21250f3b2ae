import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { HostOperator, httpHostOperatorClient, LocalRecoveryProvider, ProcessSupervisor } from "@kiln/host";
import { registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { enrolledHost, hostOperatorFor, listeningOrigin, operatorSession } from "./host-recovery-fixtures.js";

/**
 * operator.hosts.activations.get over HTTP on real storage of each dialect: each start of a
 * host operator (a real HostOperator speaking the host protocol over HTTP to the listening app)
 * is one activation with its plan, ledger and receipt, most recently written first; `operation`
 * selects one; reading mutates nothing (rule 3); a host with no boot authority, or an operation
 * it has no activation of, is `not_found`; a malformed operation is `invalid_request`.
 */

type Activations = {
  host: string;
  readiness: { instance: string; recovery_binding_loaded: boolean; provider_identity_readable: boolean };
  boot_authority: { boot: string; since: string };
  activations: {
    operation: string;
    boot: string;
    plan: string[];
    steps: { step: string; state: string; destructive: boolean; started_at: string; finished_at: string }[];
    receipt: { outcome: string; finished_at: string; detail?: string } | null;
    written_at: string;
  }[];
};

const PLAN = ["load_provisioning_bundle", "load_recovery_binding", "check_provider_identity", "record_readiness"];

for (const dialect of DIALECTS) {
  describe(`host activations (${dialect.name})`, { skip: dialect.skip }, () => {
    it("two host operator starts on two boots are two activations, newest first, each with its ledger and receipt; reads mutate nothing", async () => {
      const t: TestApp = await testApp(await dialect.openFresh());
      try {
        const origin = await listeningOrigin(t);
        const op = await operatorSession(t);
        const hostId = "activated";
        await registerHost(t.storage, {
          id: hostId,
          vcpus: 8,
          memoryBytes: 2 ** 34,
          isolation: "sandbox",
          now: t.clock.now(),
        });
        await registerHost(t.storage, {
          id: "never-started",
          vcpus: 8,
          memoryBytes: 2 ** 34,
          isolation: "sandbox",
          now: t.clock.now(),
        });
        const identity = await enrolledHost(t, hostId);

        // A host no host operator ever started on holds no boot authority: not_found.
        const none = await op.get(`/operator/api/hosts/${hostId}/activations`);
        assert.equal(none.statusCode, 404, none.body);
        assert.equal(none.json().code, "not_found");
        assert.equal((await op.get("/operator/api/hosts/nowhere/activations")).json().code, "not_found");

        // First start, on boot-1, with the local recovery binding (a real supervisor, not started).
        const supervisor = new ProcessSupervisor({
          serviceName: "kiln-host",
          command: process.execPath,
          args: ["-e", ""],
          env: {},
          ready: /never/,
        });
        const provider = new LocalRecoveryProvider({
          supervisor,
          dataDir: await mkdtemp(join(tmpdir(), "kiln-host-data-")),
        });
        const first = hostOperatorFor(t, { origin, identity, hostId, provider, boot: "boot-1" });
        await first.operator.runOnce();
        await first.operator.runOnce(); // a second pass of the same start records no second activation

        // Second start, after a reboot, with no recovery binding loaded.
        await t.clock.advance(600_000);
        const second = new HostOperator({
          client: httpHostOperatorClient({ endpoint: origin, identity }),
          hostId,
          instance: "operator-after-reboot",
          environment: "test",
          provisioningBundle: Buffer.from("bundle"),
          provider: null,
          boot: "boot-2",
          clock: t.clock,
          log: silentLogger,
        });
        await second.runOnce();

        const rows = async () => ({
          activations: await t.storage.db.selectFrom("host_activations").selectAll().orderBy("operation").execute(),
          readiness: await t.storage.db.selectFrom("host_operator_readiness").selectAll().execute(),
          hosts: await t.storage.db.selectFrom("hosts").selectAll().orderBy("id").execute(),
        });
        const before = await rows();
        const auditBefore = (await op.audit()).length;
        const read = await op.get(`/operator/api/hosts/${hostId}/activations`);
        assert.equal(read.statusCode, 200, read.body);
        const doc = read.json() as Activations;

        assert.equal(doc.boot_authority.boot, "boot-2");
        assert.equal(doc.readiness.instance, "operator-after-reboot");
        assert.equal(doc.readiness.recovery_binding_loaded, false);
        assert.deepEqual(
          doc.activations.map((a) => a.boot),
          ["boot-2", "boot-1"],
        );
        const [newest, oldest] = doc.activations;
        assert.ok(newest !== undefined && oldest !== undefined);
        assert.notEqual(newest.operation, oldest.operation);
        assert.ok(newest.written_at > oldest.written_at);
        for (const a of doc.activations) {
          assert.match(a.operation, /^[a-z0-9][a-z0-9-]{0,62}$/);
          assert.deepEqual(a.plan, PLAN);
          assert.deepEqual(
            a.steps.map((s) => s.step),
            PLAN,
          );
          for (const s of a.steps) assert.ok(s.started_at !== null && s.finished_at !== null && !s.destructive);
        }
        assert.deepEqual(
          oldest.steps.map((s) => s.state),
          ["succeeded", "succeeded", "succeeded", "succeeded"],
        );
        assert.equal(oldest.receipt?.outcome, "succeeded");
        assert.deepEqual(
          newest.steps.map((s) => s.state),
          ["succeeded", "failed", "skipped", "succeeded"],
        );
        assert.equal(newest.receipt?.outcome, "failed");
        assert.equal(newest.receipt?.detail, "load_recovery_binding: no recovery binding loaded");

        // `operation`: only that activation's ledger.
        const one = await op.get(`/operator/api/hosts/${hostId}/activations?operation=${oldest.operation}`);
        assert.equal(one.statusCode, 200, one.body);
        assert.deepEqual((one.json() as Activations).activations, [oldest]);

        // Rule 3: reading mutates nothing — the same rows and no audit entry after every read.
        assert.deepEqual((await op.get(`/operator/api/hosts/${hostId}/activations`)).json(), doc);
        assert.deepEqual(await rows(), before);
        assert.equal((await op.audit()).length, auditBefore);

        // An operation this host has no activation of (another host's included) is not_found.
        const unknown = await op.get(`/operator/api/hosts/${hostId}/activations?operation=activation-0`);
        assert.equal(unknown.statusCode, 404, unknown.body);
        assert.equal(unknown.json().code, "not_found");
        const elsewhere = await op.get(`/operator/api/hosts/never-started/activations?operation=${oldest.operation}`);
        assert.equal(elsewhere.json().code, "not_found");

        // A malformed operation is invalid_request.
        for (const bad of ["Activation", "-x", "a".repeat(64), "a_b"]) {
          const r = await op.get(`/operator/api/hosts/${hostId}/activations?operation=${encodeURIComponent(bad)}`);
          assert.equal(r.statusCode, 400, `${bad}: ${r.body}`);
          assert.equal(r.json().code, "invalid_request");
        }
        assert.deepEqual(await rows(), before);
      } finally {
        await t.close();
      }
    });
  });
}
