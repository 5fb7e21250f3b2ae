import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import {
  FleetChannel,
  type HostEvent,
  type HostProtocol,
  httpHostProtocol,
  listAdmittedToolchains,
  sandboxIsolation,
} from "@kiln/host";
import { registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { hostProtocolOf, type TestApp, testApp } from "../src/testing/harness.js";
import { listenForHosts, type TestHostListener } from "./host-listener-fixture.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/**
 * operator.hosts.history, operator.hosts.deployment.register and
 * operator.hosts.initialization.start / observe through the HTTP routes with an operator
 * session. Initializations run for real on this machine's host agent side (FleetChannel with
 * the real checks: sandbox user, bubblewrap starting a sandbox, an attempt cgroup holding its
 * limits, admitted toolchains): the embedded host through the in-process binding, a remote
 * host that enrolls with the bootstrap credential the start issued through the HTTP binding.
 */
for (const dialect of DIALECTS) {
  describe(`operator fleet: history, deployment, initialization (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let operator: OperatorClient;
    let hosts: TestHostListener;
    let embedded: HostProtocol;
    const events: HostEvent[] = [];
    const reporting = { log: silentLogger, emit: (e: HostEvent) => events.push(e) };

    before(async () => {
      t = await testApp(await dialect.openFresh());
      hosts = await listenForHosts(t);
      const now = t.clock.now();
      for (const id of ["local", "builder-1"]) {
        await registerHost(t.storage, { id, vcpus: 16, memoryBytes: 2 ** 34, isolation: "sandbox", now });
      }
      embedded = hostProtocolOf({ storage: t.storage, blobs: t.deps.blobs, clock: t.clock });
      operator = await operatorClient(t.app, t.storage, t.clock.now());
    });
    after(() => t.close());

    const channel = (hostId: string, protocol: HostProtocol) =>
      new FleetChannel({
        hostId,
        protocol,
        clock: t.clock,
        steps: sandboxIsolation().initializationSteps,
        reporting,
        sandboxes: () => [],
      });

    it("without an operator session the fleet operations answer operator_not_found", async () => {
      for (const [method, url] of [
        ["GET", "/operator/api/hosts/history"],
        ["GET", "/operator/api/hosts/local/initialization"],
        ["POST", "/operator/api/hosts/local/initialization"],
        ["POST", "/operator/api/hosts/local/deployment"],
      ] as const) {
        const r = await t.app.inject({
          method,
          url,
          headers: { "sec-fetch-site": "same-origin", "content-type": "application/json" },
          ...(method === "POST" ? { payload: "{}" } : {}),
        });
        assert.equal(r.statusCode, 404, `${method} ${url}`);
        assert.equal(r.json().code, "operator_not_found");
      }
    });

    it("deployment register records the release, moves the revision and leaves a receipt; a stale revision is a conflict", async () => {
      const sha = "a".repeat(64);
      const registered = await operator.post("/operator/api/hosts/builder-1/deployment", {
        release: "kiln-host 0.4.2",
        release_sha256: sha,
        expected_revision: 0,
      });
      assert.equal(registered.statusCode, 200, registered.body);
      assert.equal(registered.json().deployed_release, "kiln-host 0.4.2");
      assert.equal(registered.json().state, "serving", "a deployment leaves the serving state as it stands");
      assert.equal(registered.json().revision, 1);
      assert.equal(registered.json().last_attribution.action, "operator.hosts.deployment.register");

      const stale = await operator.post("/operator/api/hosts/builder-1/deployment", {
        release: "kiln-host 0.4.3",
        expected_revision: 0,
      });
      assert.equal(stale.statusCode, 409);
      assert.equal(stale.json().code, "conflict");
      assert.match(stale.json().detail, /current revision 1/);
      const bad = await operator.post("/operator/api/hosts/builder-1/deployment", { release: "" });
      assert.equal(bad.statusCode, 400);
      assert.equal(bad.json().code, "invalid_request");
      const badDigest = await operator.post("/operator/api/hosts/builder-1/deployment", {
        release: "x",
        release_sha256: "nope",
      });
      assert.equal(badDigest.statusCode, 400);
      const missing = await operator.post("/operator/api/hosts/nowhere/deployment", { release: "x" });
      assert.equal(missing.statusCode, 404);
      assert.equal(missing.json().code, "operator_not_found");

      const listed = (await operator.get("/operator/api/hosts")).json() as {
        host: string;
        deployed_release: string | null;
      }[];
      assert.deepEqual(
        listed.map((h) => [h.host, h.deployed_release]),
        [
          ["builder-1", "kiln-host 0.4.2"],
          ["local", null],
        ],
      );
      const detail = (await operator.get("/operator/api/hosts/builder-1")).json();
      assert.equal(detail.deployed_release.release, "kiln-host 0.4.2");
      assert.equal(detail.deployed_release.sha256, sha);
      assert.equal(detail.receipts.length, 1);
      assert.equal(detail.receipts[0].kind, "deployment");
      assert.match(detail.receipts[0].summary, /kiln-host 0\.4\.2/);

      const audit = (await operator.audit()).filter((e) => e.operation === "operator.hosts.deployment.register");
      assert.deepEqual(
        audit.map((e) => e.outcome),
        ["conflict", "performed"],
        "the registration and the refused one are both audited, newest first",
      );
    });

    it("history lists enrollments and every recorded change newest first, with who, action and revision", async () => {
      assert.equal((await operator.post("/operator/api/hosts/builder-1/drain")).statusCode, 200);
      await t.clock.advance(1000);
      assert.equal(
        (await operator.post("/operator/api/hosts/builder-1/undrain", { policy_revision: 2 })).statusCode,
        200,
      );
      const history = await operator.get("/operator/api/hosts/history");
      assert.equal(history.statusCode, 200, history.body);
      const entries = history.json() as {
        host: string;
        from: string;
        to: string;
        action: string;
        actor: string;
        revision: number | null;
        reason?: string;
      }[];
      const builder = entries.filter((e) => e.host === "builder-1");
      assert.deepEqual(
        builder.map((e) => [e.action, e.from, e.to, e.revision]),
        [
          ["operator.hosts.undrain", "draining", "serving", 3],
          ["operator.hosts.drain", "serving", "draining", 2],
          ["operator.hosts.deployment.register", "serving", "serving", 1],
          ["host.enroll", "unenrolled", "serving", 0],
        ],
      );
      assert.match(builder[2]?.reason ?? "", /\(none\) → kiln-host 0\.4\.2/);
      assert.ok(
        builder.slice(0, 3).every((e) => e.actor.startsWith("operator")),
        "operator changes name the operator",
      );
      assert.equal(builder[3]?.actor, "host:builder-1");
    });

    it("the embedded host runs an initialization for real and reports each step; the ledger, receipt and history show it", async () => {
      const toolchain = (await listAdmittedToolchains())[0]?.name;
      assert.ok(toolchain !== undefined, "this machine has a rustup toolchain installed");
      const started = await operator.post("/operator/api/hosts/local/initialization", {
        toolchains: [toolchain],
        note: "first boot",
      });
      assert.equal(started.statusCode, 200, started.body);
      const init = started.json();
      assert.equal(init.state, "pending", "nothing runs on the control plane: the host takes it on its next poll");
      assert.deepEqual(init.steps, [], "the steps are the host's own: its first report lists them");
      assert.equal(init.bootstrap_credential, null, "the embedded host needs no bootstrap credential");

      const again = await operator.post("/operator/api/hosts/local/initialization", {});
      assert.equal(again.statusCode, 409);
      assert.equal(again.json().code, "conflict");
      assert.match(again.json().detail, new RegExp(`${init.operation} of host local is pending`));

      assert.equal((await channel("local", embedded).runOnce()).initialization, "finished");
      const observed = await operator.get("/operator/api/hosts/local/initialization");
      assert.equal(observed.statusCode, 200, observed.body);
      const done = observed.json();
      assert.equal(done.operation, init.operation);
      assert.equal(done.state, "succeeded", JSON.stringify(done.steps));
      assert.deepEqual(
        done.steps.map((s: { step: string }) => s.step),
        ["sandbox_user", "bubblewrap", "cgroup_delegation", "toolchains"],
        "a sandbox host's steps, in its order",
      );
      assert.ok(done.finished_at !== null);
      const detailOf = (step: string) => done.steps.find((s: { step: string }) => s.step === step)?.detail ?? "";
      assert.match(detailOf("sandbox_user"), /sandbox user kiln-sandbox \(uid \d+/);
      assert.match(detailOf("bubblewrap"), /bubblewrap .* started a sandbox as kiln-sandbox/);
      assert.match(detailOf("cgroup_delegation"), /cgroup layout: .*held cpu, memory and pids limits/);
      assert.match(detailOf("toolchains"), new RegExp(`${toolchain} → ${toolchain}`));
      assert.ok(
        done.steps.every(
          (s: { started_at: string | null; finished_at: string | null }) =>
            s.started_at !== null && s.finished_at !== null,
        ),
      );

      // The host's report for a finished initialization changes nothing.
      assert.equal(
        await embedded.reportInitialization({ hostId: "local", operation: init.operation, steps: [] }),
        "stale",
      );
      assert.equal(
        (await channel("local", embedded).runOnce()).initialization,
        "none",
        "nothing is open for the host any more",
      );

      const detail = (await operator.get("/operator/api/hosts/local")).json();
      assert.equal(detail.receipts[0].kind, "initialization");
      assert.match(detail.receipts[0].summary, new RegExp(`${init.operation} succeeded`));
      const history = (await operator.get("/operator/api/hosts/history")).json() as {
        host: string;
        from: string;
        to: string;
        action: string;
      }[];
      assert.deepEqual(
        history
          .filter((e) => e.host === "local")
          .slice(0, 2)
          .map((e) => [e.action, e.from, e.to]),
        [
          ["host.initialization.finish", "initializing", "serving"],
          ["operator.hosts.initialization.start", "serving", "initializing"],
        ],
      );
      const audit = (await operator.audit()).filter((e) => e.operation === "operator.hosts.initialization.start");
      assert.deepEqual(
        audit.map((e) => e.outcome),
        ["conflict", "performed"],
      );
    });

    it("a step that fails fails the initialization with its reason, leaving the later steps skipped", async () => {
      const started = await operator.post("/operator/api/hosts/local/initialization", {
        toolchains: ["no-such-toolchain-0.0.1"],
      });
      assert.equal(started.statusCode, 200, started.body);
      assert.equal((await channel("local", embedded).runOnce()).initialization, "finished");
      const done = (await operator.get("/operator/api/hosts/local/initialization")).json();
      assert.equal(done.state, "failed");
      assert.match(
        done.failure,
        /step toolchains failed: toolchain "no-such-toolchain-0\.0\.1" is not admitted on this host; admitted: /,
      );
      assert.deepEqual(
        done.steps.map((s: { state: string }) => s.state),
        ["succeeded", "succeeded", "succeeded", "failed"],
      );
      const history = (await operator.get("/operator/api/hosts/history")).json() as { host: string; to: string }[];
      assert.equal(history.find((e) => e.host === "local")?.to, "initialization_failed");
    });

    it("a host not yet enrolled gets its one-time bootstrap credential from the start, enrolls with it over HTTPS (mutual TLS) and runs the initialization there", async () => {
      const bad = await operator.post("/operator/api/hosts/bad:id/initialization", {});
      assert.equal(bad.statusCode, 400);
      assert.equal(bad.json().code, "invalid_request");
      const unknownRevision = await operator.post("/operator/api/hosts/builder-9/initialization", {
        expected_revision: 0,
      });
      assert.equal(unknownRevision.statusCode, 409, "a host with no row has no revision to name");

      const started = await operator.post("/operator/api/hosts/builder-9/initialization", {});
      assert.equal(started.statusCode, 200, started.body);
      const token = started.json().bootstrap_credential?.token as string;
      assert.match(token, /^kiln_enroll_/);
      const audit = await operator.audit();
      assert.ok(
        audit.every((e) => !(e.value ?? "").includes(token)),
        "the bootstrap credential is shown once in the answer and never recorded in the audit",
      );
      const identities = (await operator.get("/operator/api/identities")).json().identities as {
        role: string;
        host: string | null;
      }[];
      assert.ok(identities.some((i) => i.role === "bootstrap" && i.host === "builder-9"));
      const observedBefore = (await operator.get("/operator/api/hosts/builder-9/initialization")).json();
      assert.equal(observedBefore.state, "pending");

      const identity = await hosts.enrollWith(token);
      assert.equal(identity.hostId, "builder-9");
      const remote = httpHostProtocol({ endpoint: hosts.origin, identity });
      await remote.enroll({ id: "builder-9", vcpus: 2, memoryBytes: 2 ** 32, isolation: "sandbox" });
      assert.equal((await channel("builder-9", remote).runOnce()).initialization, "finished");
      const done = (await operator.get("/operator/api/hosts/builder-9/initialization")).json();
      assert.equal(done.state, "succeeded", JSON.stringify(done.steps));
      assert.deepEqual(
        done.steps.map((s: { step: string }) => s.step),
        ["sandbox_user", "bubblewrap", "cgroup_delegation", "toolchains"],
        "a sandbox host's steps, in its order",
      );
      assert.equal(done.steps.length, 4);

      // A host may only speak for itself.
      await assert.rejects(
        remote.reportInitialization({ hostId: "local", operation: done.operation, steps: [] }),
        /names host local; this certificate is builder-9's/,
      );
      const none = await operator.get("/operator/api/hosts/builder-1/initialization");
      assert.equal(none.statusCode, 404);
      assert.equal(none.json().code, "operator_not_found");
    });
  });
}
