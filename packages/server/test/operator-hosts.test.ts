import assert from "node:assert/strict";
import { createHash, X509Certificate } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { newKeyAndSigningRequest } from "@kiln/host";
import { claimNextJob, createTenant, registerHost } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { enrollHost, mintHostEnrollmentToken, revokeHost } from "../src/domain/hosts/host-identities.js";
import { CertificateAuthority } from "../src/domain/pki/certificate-authority.js";
import { listenerCertificate } from "../src/domain/pki/listener-certificate.js";
import { VCPUS_OF_SIZE } from "../src/domain/policy/platform-limits.js";
import { type TestApp, testApp } from "../src/testing/harness.js";
import { acceptJob } from "../src/testing/job-fixtures.js";
import { type OperatorClient, operatorClient } from "./operator-session-fixture.js";

/**
 * operator.hosts.list / get / drain / undrain and operator.identities.list through the HTTP
 * routes with an operator session, over the hosts kiln records: the embedded host `local` and
 * enrolled remote hosts. Drain is checked where it takes effect, the storage claim verb.
 */
for (const dialect of DIALECTS) {
  describe(`operator hosts (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let operator: OperatorClient;
    let certificates: Map<string, string>;
    const tenant = "acme-hosts";
    const WEEK = 7 * 24 * 3600;
    const AUTO_FELL_BACK = "auto: KVM did not boot the probe guest within 5 s; serving with the sandbox";

    before(async () => {
      t = await testApp(await dialect.openFresh());
      const now = t.clock.now();
      await createTenant(t.storage, { id: tenant }, t.clock.now());
      for (const id of ["local", "builder-1", "builder-2"]) {
        await registerHost(t.storage, {
          id,
          vcpus: 64,
          memoryBytes: 2 ** 37,
          isolation: "sandbox",
          // What a host says at enrollment: why it serves with its isolation (none said by `local` here).
          ...(id === "builder-2" ? { isolationReason: AUTO_FELL_BACK } : {}),
          now,
        });
      }
      // builder-1 enrolled and holds a live certificate; builder-2's was revoked; builder-3 has
      // an outstanding enrollment token only; the host listener's certificate exists.
      const secrets = t.deps.secrets;
      assert.ok(secrets !== undefined);
      const ca = await CertificateAuthority.load(t.storage, secrets, now);
      certificates = new Map();
      for (const hostId of ["builder-1", "builder-2"]) {
        const { token } = await mintHostEnrollmentToken(t.storage, { hostId, createdBy: "operator", now });
        const { csrPem } = await newKeyAndSigningRequest();
        const issued = await enrollHost(t.storage, ca, { token, csrPem, lifetimeSeconds: WEEK, now });
        certificates.set(hostId, issued.certificatePem);
      }
      await revokeHost(t.storage, { hostId: "builder-2", revokedBy: "operator", now });
      await mintHostEnrollmentToken(t.storage, { hostId: "builder-3", createdBy: "operator", ttlSeconds: 3600, now });
      await listenerCertificate(t.storage, ca, secrets, {
        names: ["kiln.test", "127.0.0.1"],
        lifetimeSeconds: WEEK,
        now,
      });

      operator = await operatorClient(t.app, t.storage, t.clock.now());
    });
    after(() => t.close());

    const claim = (hostId: string) =>
      claimNextJob(t.storage, {
        hostId,
        freeVcpus: 64,
        vcpusOfSize: VCPUS_OF_SIZE,
        leaseSeconds: 60,
        now: t.clock.now(),
      });

    it("without an operator session every host operation answers operator_not_found", async () => {
      for (const [method, url] of [
        ["GET", "/operator/api/hosts"],
        ["GET", "/operator/api/hosts/local"],
        ["GET", "/operator/api/identities"],
        ["POST", "/operator/api/hosts/local/drain"],
      ] as const) {
        const r = await t.app.inject({ method, url, headers: { "sec-fetch-site": "same-origin" } });
        assert.equal(r.statusCode, 404, `${method} ${url}`);
        assert.equal(r.json().code, "operator_not_found");
      }
    });

    it("lists every recorded host, serving at revision 0 with no attribution", async () => {
      const r = await operator.get("/operator/api/hosts");
      assert.equal(r.statusCode, 200, r.body);
      const hosts = r.json() as { host: string; state: string; revision: number; last_attribution: unknown }[];
      assert.deepEqual(
        hosts.map((h) => [h.host, h.state, h.revision, h.last_attribution]),
        [
          ["builder-1", "serving", 0, null],
          ["builder-2", "serving", 0, null],
          ["local", "serving", 0, null],
        ],
      );
      const detail = await operator.get("/operator/api/hosts/local");
      assert.equal(detail.statusCode, 200, detail.body);
      assert.equal(detail.json().serving_state, "serving");
      assert.equal(detail.json().drain_attribution, null);
      assert.deepEqual(detail.json().blockers, []);
      assert.equal(detail.json().isolation, "sandbox");
      assert.equal(detail.json().isolation_reason, null, "a host that said nothing of why");
      const fellBack = (await operator.get("/operator/api/hosts/builder-2")).json();
      assert.equal(fellBack.isolation, "sandbox");
      assert.equal(fellBack.isolation_reason, AUTO_FELL_BACK, "the host's own reason, as it enrolled with it");
      const missing = await operator.get("/operator/api/hosts/nowhere");
      assert.equal(missing.statusCode, 404);
      assert.equal(missing.json().code, "operator_not_found");
    });

    it("drain stops placement on the host while its running attempt continues; undrain returns it", async () => {
      const running = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      const placed = await claim("builder-1");
      assert.equal(placed?.job.id, running.id, "builder-1 runs a job before the drain");

      const drained = await operator.post("/operator/api/hosts/builder-1/drain");
      assert.equal(drained.statusCode, 200, drained.body);
      assert.equal(drained.json().state, "draining", "it still runs an attempt");
      assert.equal(drained.json().revision, 1);
      assert.equal(drained.json().last_attribution.action, "operator.hosts.drain");

      const queued = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      assert.equal(await claim("builder-1"), undefined, "a draining host's claim gets no new job");
      const detail = (await operator.get("/operator/api/hosts/builder-1")).json();
      assert.equal(detail.serving_state, "draining");
      assert.equal(detail.drain_attribution.action, "operator.hosts.drain");
      assert.deepEqual(
        detail.blockers.map((b: { kind: string }) => b.kind),
        ["drained", "running_attempts"],
      );
      // The running attempt keeps its lease: it is still the host's.
      assert.equal(detail.running_attempts, 1);

      const again = await operator.post("/operator/api/hosts/builder-1/drain");
      assert.equal(again.statusCode, 409);
      assert.equal(again.json().code, "conflict");
      assert.match(again.json().detail, /already drained/);

      const stale = await operator.post("/operator/api/hosts/builder-1/undrain", { policy_revision: 0 });
      assert.equal(stale.statusCode, 409);
      assert.match(stale.json().detail, /current policy revision 1/);
      const bad = await operator.post("/operator/api/hosts/builder-1/undrain", { policy_revision: "one" });
      assert.equal(bad.statusCode, 400);
      assert.equal(bad.json().code, "invalid_request");
      assert.equal(await claim("builder-1"), undefined, "refused undrains leave it drained");

      const undrained = await operator.post("/operator/api/hosts/builder-1/undrain", {
        policy_revision: 1,
        note: "fixed",
      });
      assert.equal(undrained.statusCode, 200, undrained.body);
      assert.equal(undrained.json().state, "serving");
      assert.equal(undrained.json().revision, 2);
      assert.equal(undrained.json().last_attribution.reason, "fixed");
      assert.equal((await claim("builder-1"))?.job.id, queued.id, "returned to placement");

      const serving = await operator.post("/operator/api/hosts/builder-1/undrain", { policy_revision: 2 });
      assert.equal(serving.statusCode, 409);
      assert.match(serving.json().detail, /is serving/);
      const unknown = await operator.post("/operator/api/hosts/nowhere/drain");
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.json().code, "operator_not_found");

      const audit = (await operator.audit()).filter(
        (e) => e.target === "host:builder-1" && e.operation.startsWith("operator.hosts."),
      );
      assert.deepEqual(
        audit.map((e) => [e.operation, e.outcome]),
        [
          ["operator.hosts.undrain", "conflict"],
          ["operator.hosts.undrain", "performed"],
          ["operator.hosts.undrain", "conflict"],
          ["operator.hosts.drain", "conflict"],
          ["operator.hosts.drain", "performed"],
        ],
      );
    });

    it("a drained host with no running attempt is `drained`; other hosts still claim", async () => {
      const r = await operator.post("/operator/api/hosts/builder-2/drain");
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(r.json().state, "drained");
      const job = await acceptJob(t.storage, { tenant, now: t.clock.now() });
      assert.equal(await claim("builder-2"), undefined);
      assert.equal((await claim("local"))?.job.id, job.id);
      const list = (await operator.get("/operator/api/hosts")).json() as { host: string; state: string }[];
      assert.deepEqual(
        list.map((h) => [h.host, h.state]),
        [
          ["builder-1", "serving"],
          ["builder-2", "drained"],
          ["local", "serving"],
        ],
      );
    });

    it("identities: each host's certificate, outstanding bootstrap credentials, the CA and host listener, provisioner", async () => {
      const r = await operator.get("/operator/api/identities");
      assert.equal(r.statusCode, 200, r.body);
      type Entry = {
        role: string;
        host: string | null;
        subject: string;
        certificate_sha256: string | null;
        issuer: string | null;
        not_before: string | null;
        not_after: string | null;
        remaining_seconds: number | null;
        remaining_fraction: number | null;
        no_window_reason: string | null;
        revoked_at?: string | null;
        certificates_live?: number;
        credential_sha256?: string;
        names?: string[];
      };
      const doc = r.json() as { computed_at: string; identities: Entry[] };
      assert.deepEqual(
        doc.identities.map((i) => [i.role, i.host, i.subject]),
        [
          ["host", "builder-1", "CN=builder-1"],
          ["host", "builder-2", "CN=builder-2"],
          ["host", "local", "host:local"],
          ["bootstrap", "builder-3", "enrollment-token:builder-3"],
          ["controller", null, "CN=kiln host CA"],
          ["controller", null, "CN=kiln host listener"],
          ["provisioner", null, "none"],
        ],
      );
      const [b1, b2, local, bootstrap, ca, listener, provisioner] = doc.identities;
      const now = t.clock.now();
      // A host's certificate: its DER's digest, its issuer, its window (backdated 300 s for clock
      // skew), the seconds and fraction of it left.
      const der = new X509Certificate(certificates.get("builder-1") ?? "").raw;
      assert.equal(b1?.certificate_sha256, createHash("sha256").update(der).digest("hex"));
      assert.equal(b1?.issuer, "CN=kiln host CA");
      assert.equal(b1?.no_window_reason, null);
      assert.equal(Date.parse(b1?.not_after ?? "") - Date.parse(b1?.not_before ?? ""), (WEEK + 300) * 1000);
      assert.equal(b1?.remaining_seconds, WEEK);
      assert.equal(b1?.remaining_fraction, WEEK / (WEEK + 300));
      assert.equal(b1?.revoked_at, null);
      assert.equal(b1?.certificates_live, 1);
      assert.equal(b2?.certificates_live, 0);
      assert.equal(b2?.revoked_at, now.toISOString(), "builder-2's certificate is shown revoked");
      assert.match(local?.no_window_reason ?? "", /embedded/);
      assert.equal(local?.certificate_sha256, null);
      assert.equal(bootstrap?.remaining_seconds, 3600);
      assert.equal(bootstrap?.remaining_fraction, 1);
      assert.equal(bootstrap?.no_window_reason, null);
      assert.match(bootstrap?.credential_sha256 ?? "", /^[0-9a-f]{64}$/, "the bootstrap credential as a digest");
      assert.equal(ca?.issuer, "CN=kiln host CA", "the CA is self-signed");
      assert.match(ca?.certificate_sha256 ?? "", /^[0-9a-f]{64}$/);
      assert.ok((ca?.remaining_seconds ?? 0) > 9 * 365 * 24 * 3600);
      assert.deepEqual(listener?.names, ["kiln.test", "127.0.0.1"]);
      assert.equal(listener?.issuer, "CN=kiln host CA");
      assert.equal(listener?.remaining_seconds, WEEK);
      assert.match(provisioner?.no_window_reason ?? "", /no provisioner/);
      assert.doesNotMatch(
        r.body,
        /kiln_(host|enroll)_|PRIVATE KEY|BEGIN CERTIFICATE/,
        "never key or credential material",
      );
    });

    it("identities: a host never enrolled is named so", async () => {
      await registerHost(t.storage, {
        id: "builder-4",
        vcpus: 8,
        memoryBytes: 2 ** 33,
        isolation: "sandbox",
        now: t.clock.now(),
      });
      const doc = (await operator.get("/operator/api/identities")).json() as {
        identities: { role: string; host: string | null; no_window_reason: string | null }[];
      };
      const entry = doc.identities.find((i) => i.role === "host" && i.host === "builder-4");
      assert.match(entry?.no_window_reason ?? "", /never enrolled/);
    });
  });
}
