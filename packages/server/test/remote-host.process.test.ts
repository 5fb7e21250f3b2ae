/**
 * Remote `kiln-host`s against a control plane's host listener, on real storage of each dialect:
 * the host agent runs in this process but reaches the control plane only over HTTPS with mutual
 * TLS (real TLS on 127.0.0.1), its client certificate issued by kiln's own CA from the host's
 * own key, obtained once with a one-time bootstrap credential; the in-memory executor stands in
 * for cargo. Also: certificates that must be refused (none, another CA's, expired, revoked),
 * renewal at two thirds of the lifetime on a manual clock, and a host acting on another host's
 * attempt.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { chmod, readFile, rm, stat } from "node:fs/promises";
import { Agent } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type AttemptResult, HOST_PROTOCOL_ROUTES, silentLogger, systemClock } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import {
  type Executor,
  type HostEvent,
  type HostFetch,
  HostProtocolRefusal,
  HostTlsIdentity,
  httpHostProtocol,
  httpsFetch,
  loadHostIdentity,
  newKeyAndSigningRequest,
  type RenewalEvent,
  type RunningKilnHost,
  requestEnrollment,
  requestRenewal,
  sandboxIsolation,
  startCertificateRenewal,
  startKilnHost,
  tlsFilesIn,
} from "@kiln/host";
import { InMemoryExecutor } from "@kiln/host/testing";
import { onboardRepository, openStorage, readJob, readLogRecords, type Storage } from "@kiln/storage";
import { DIALECTS, openSqliteForTest } from "@kiln/storage/testing";
import { mintHostEnrollmentToken, revokeHost } from "../src/domain/hosts/host-identities.js";
import { CertificateAuthority } from "../src/domain/pki/certificate-authority.js";
import { SecretBox } from "../src/domain/secrets/secret-box.js";
import { bearer, personWithToken, type TestApp, testApp } from "../src/testing/harness.js";
import { eventually, inlineSubmission } from "../src/testing/job-fixtures.js";
import { masterKey } from "../src/web/auth/operator-credential.js";
import { listenForHosts, type TestHostListener, WEEK_SECONDS } from "./host-listener-fixture.js";
import { operatorClient } from "./operator-session-fixture.js";

const REPOSITORY = "acme/widget";

const passed: AttemptResult = {
  outcome: "passed",
  exitCode: 0,
  failure: null,
  report: { phases: [], crates: [], tests: [], unit: null },
  cargoOutput: null,
  lineageSave: null,
  artifacts: [],
};

/** The refusal a host protocol call was answered with. */
async function refusalOf(call: Promise<unknown>): Promise<{ status: number; code: string; detail: string }> {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof HostProtocolRefusal, `refused by the control plane, not ${String(error)}`);
    return { status: error.status, code: error.code, detail: error.detail };
  }
  assert.fail("the control plane answered instead of refusing");
}

/** Requests under a TLS agent made by hand: no client certificate, or one kiln's CA did not issue. */
const speakingWith = (agent: Agent): { fetch: HostFetch } => ({ fetch: httpsFetch(() => agent) });

const inMemoryHost = {
  resolveToolchain: async (name: string) => ({ name, path: "/nonexistent/toolchain" }),
  lineages: null,
  scratchRoot: null,
  memoryBytes: 8 * 2 ** 30,
} as const;

for (const dialect of DIALECTS) {
  describe(`remote kiln-host over mutual TLS (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let hosts: TestHostListener;
    /** The clock the host listener issues and judges certificates by; starts at the machine's time. */
    let pkiClock: ManualClock;
    let owner: { tenant: string; token: string };
    let publicOrigin: string;
    let dataDir: string;
    let running: RunningKilnHost | null = null;
    let keys = 0;

    beforeEach(async () => {
      t = await testApp(await dialect.openFresh(), { clock: systemClock });
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      const address = t.app.server.address();
      assert.ok(address !== null && typeof address === "object");
      publicOrigin = `http://127.0.0.1:${address.port}`;
      pkiClock = new ManualClock(new Date());
      hosts = await listenForHosts(t, { clock: pkiClock });
      owner = await personWithToken(t.storage);
      await onboardRepository(
        t.storage,
        { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "test" },
        t.clock.now(),
      );
      dataDir = mkdtempSync(join(tmpdir(), "kiln-remote-host-"));
    });

    afterEach(async () => {
      await running?.stop();
      running = null;
      await t.close();
      await rm(dataDir, { recursive: true, force: true });
    });

    /** jobs.submit over the public API, as the CLI does. */
    const submit = async (): Promise<string> => {
      keys += 1;
      const response = await fetch(`${publicOrigin}/api/v4/jobs`, {
        method: "POST",
        headers: { ...bearer(owner.token), "idempotency-key": `remote-${keys}`, "content-type": "application/json" },
        body: JSON.stringify(inlineSubmission(REPOSITORY)),
      });
      const jobId = (await response.json()) as string;
      assert.equal(response.status, 200, JSON.stringify(jobId));
      return jobId;
    };

    /** A host enrolled over HTTPS, and the protocol bound to its identity. */
    const enrolledHost = async (hostId: string) => {
      const identity = await hosts.enroll(hostId);
      assert.equal(identity.hostId, hostId);
      const protocol = httpHostProtocol({ endpoint: hosts.origin, identity });
      await protocol.enroll({ id: hostId, vcpus: 4, memoryBytes: 2 ** 33, isolation: "sandbox" });
      return { identity, protocol };
    };

    const jobOf = async (storage: Storage, jobId: string) => {
      const record = await readJob(storage.db, { tenantId: owner.tenant, jobId });
      assert.ok(record !== undefined);
      return record;
    };

    it("kiln-host enrolls once with a bootstrap credential, pinning kiln's CA, and claims, ships logs, fetches and puts blobs and finishes a job over mutual TLS only", async () => {
      const events: HostEvent[] = [];
      const inMemory = new InMemoryExecutor(systemClock);
      // What the sandbox would see: the source, materialized from blobs fetched over HTTPS.
      const sources: string[] = [];
      const executor: Executor = {
        isolation: "sandbox",
        run: async (request) => {
          sources.push(await readFile(join(request.workspaceDir, "src/lib.rs"), "utf8"));
          return inMemory.run(request);
        },
      };
      inMemory.script({
        stdout: ["   Compiling demo v0.1.0", "hello from a remote host"],
        ends: { kind: "exit", code: 0 },
      });
      const config = await hosts.hostConfig("remote-a", dataDir);
      // A data dir an earlier version left open to others is closed at start.
      await chmod(dataDir, 0o755);
      running = await startKilnHost(config, silentLogger, {
        isolation: sandboxIsolation({ executor }),
        ...inMemoryHost,
        onEvent: (event) => events.push(event),
      });
      assert.equal(running.hostId, "remote-a", "the certificate names the host");
      const kept = tlsFilesIn(dataDir);
      const identityFile = await readFile(kept.identity, "utf8");
      assert.match(identityFile, /-----BEGIN PRIVATE KEY-----[\s\S]+-----BEGIN CERTIFICATE-----/);
      assert.equal((await stat(kept.identity)).mode & 0o777, 0o600, "the key is readable by the host's user only");
      assert.equal((await stat(kept.ca)).mode & 0o777, 0o600);
      assert.equal((await stat(dataDir)).mode & 0o777, 0o700, "the host's data dir is its own");
      assert.equal(await readFile(kept.ca, "utf8"), hosts.listener.ca.certificatePem, "kiln's CA is pinned");

      const jobId = await submit();
      running.agent.wake();
      await eventually(() => events.some((e) => e.type === "attempt:end" && e.jobId === jobId));
      assert.deepEqual(
        events.find((e) => e.type === "attempt:end"),
        { type: "attempt:end", jobId, attempt: 1, answer: "finished", outcome: "passed" },
      );
      assert.deepEqual(
        events.filter((e) => e.type.endsWith(":error")),
        [],
      );
      const record = await jobOf(t.storage, jobId);
      assert.equal(record.job.status, "passed");
      assert.equal(record.attempts[0]?.host_id, "remote-a");
      // The source reached the sandbox through blob fetches over HTTPS.
      assert.deepEqual(sources, ["pub fn f() {}\n"]);
      // The log lines were appended over HTTPS, and the raw output put as a blob.
      const { records } = await readLogRecords(t.storage.db, { jobId, afterSequence: 0, limit: 100 });
      assert.ok(records.some((r) => r.text === "hello from a remote host"));
      const output = record.attempts[0]?.cargo_output_sha256;
      assert.ok(typeof output === "string" && (await t.deps.blobs.has(output)));
      assert.match((await t.deps.blobs.get(output)).toString(), /hello from a remote host/);

      // A restarted kiln-host finds its identity kept; the spent token is not needed, nor sent, again.
      await running.stop();
      running = await startKilnHost(config, silentLogger, {
        isolation: sandboxIsolation({ executor }),
        ...inMemoryHost,
      });
      assert.equal(running.hostId, "remote-a");
      assert.equal(running.identity.serial, (await HostTlsIdentity.fromFiles(kept))?.serial);
    });

    it("a bootstrap credential works exactly once, and not after it expired; a bad signing request is named", async () => {
      const enrollWith = async (token: string, csr?: string) =>
        requestEnrollment(hosts.origin, {
          token,
          csrPem: csr ?? (await newKeyAndSigningRequest()).csrPem,
          caCertificatePem: hosts.listener.ca.certificatePem,
        });
      const token = await hosts.token("remote-b");
      const badRequest = await refusalOf(enrollWith(token, "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n"));
      assert.deepEqual([badRequest.status, badRequest.code], [400, "invalid_request"]);
      assert.match(badRequest.detail, /body\.csr/);
      const issued = await enrollWith(token);
      assert.equal(issued.hostId, "remote-b");
      assert.equal(issued.caCertificate, hosts.listener.ca.certificatePem);
      const again = await refusalOf(enrollWith(token));
      assert.deepEqual([again.status, again.code], [401, "unauthenticated"]);
      assert.match(again.detail, /already redeemed/);
      const rows = await t.storage.db
        .selectFrom("issued_certificates")
        .select("serial")
        .where("host_id", "=", "remote-b")
        .execute();
      assert.equal(rows.length, 1, "one certificate for one bootstrap credential");

      const stale = await mintHostEnrollmentToken(t.storage, {
        hostId: "remote-late",
        createdBy: "test",
        ttlSeconds: 60,
        now: new Date(pkiClock.now().getTime() - 3600_000),
      });
      const expired = await refusalOf(enrollWith(stale.token));
      assert.equal(expired.code, "credential_expired");
      for (const wrong of ["kiln_host_nonsense", owner.token]) {
        const refused = await refusalOf(enrollWith(wrong));
        assert.deepEqual([refused.status, refused.code], [401, "unauthenticated"], wrong);
      }
    });

    it("no certificate, another CA's, an expired or a revoked one is refused; the public listener serves no host route", async () => {
      const { identity, protocol } = await enrolledHost("remote-c");
      assert.equal(await protocol.claim("remote-c", 2), null);
      // A claim saying its free disk travels too (AttemptClaim.freeDiskBytes).
      assert.equal(await protocol.claim("remote-c", 2, 2 ** 30), null);

      // No client certificate (the server is still verified against the pinned CA).
      const anonymous = new Agent({ ca: [hosts.listener.ca.certificatePem] });
      const bare = await refusalOf(
        httpHostProtocol({ endpoint: hosts.origin, identity: speakingWith(anonymous) }).claim("remote-c", 2),
      );
      assert.deepEqual([bare.status, bare.code], [401, "unauthenticated"]);
      assert.match(bare.detail, /client certificate/);

      // A certificate for the same host id from another CA (another deployment's).
      const elsewhere = await openSqliteForTest();
      try {
        const foreignCa = await CertificateAuthority.load(elsewhere, new SecretBox(masterKey(dataDir)), new Date());
        const { keyPem, csrPem } = await newKeyAndSigningRequest();
        const foreign = await foreignCa.issueHostCertificate({
          hostId: "remote-c",
          csrPem,
          lifetimeSeconds: WEEK_SECONDS,
          now: new Date(),
          via: "enrollment",
        });
        const impostor = new Agent({
          key: keyPem,
          cert: foreign.certificatePem,
          ca: [hosts.listener.ca.certificatePem],
        });
        const refused = await refusalOf(
          httpHostProtocol({ endpoint: hosts.origin, identity: speakingWith(impostor) }).claim("remote-c", 2),
        );
        assert.deepEqual([refused.status, refused.code], [401, "unauthenticated"]);
        assert.match(refused.detail, /not issued by this kiln's host CA/);
      } finally {
        await elsewhere.close();
      }

      // A tenant's bearer token is not a host identity.
      const tenantAsHost = await fetch(`${publicOrigin}/host/v1/identity`, { headers: bearer(owner.token) });
      assert.equal(tenantAsHost.status, 404, "the public listener serves no host route");
      const plain = await fetch(`${publicOrigin}${HOST_PROTOCOL_ROUTES.claim.path}`, { method: "POST" });
      assert.equal(plain.status, 404);
      // Plain HTTP to the host listener gets no answer from the host protocol.
      await assert.rejects(fetch(`${hosts.origin.replace("https:", "http:")}/host/v1/identity`));

      // Expired by the control plane's clock: refused naming when.
      await pkiClock.advance((WEEK_SECONDS + 1) * 1000);
      const expired = await refusalOf(protocol.claim("remote-c", 2));
      assert.deepEqual([expired.status, expired.code], [401, "credential_expired"]);
      assert.match(expired.detail, /expired at/);
      // An expired certificate cannot renew itself either.
      const renewal = await refusalOf(requestRenewal(hosts.origin, identity, (await newKeyAndSigningRequest()).csrPem));
      assert.equal(renewal.code, "credential_expired");

      // A fresh host, then revoked: every message refused naming the revocation.
      const fresh = await enrolledHost("remote-d");
      assert.equal(await fresh.protocol.claim("remote-d", 2), null);
      const { revoked } = await revokeHost(t.storage, { hostId: "remote-d", revokedBy: "test", now: pkiClock.now() });
      assert.equal(revoked, 1);
      const refused = await refusalOf(fresh.protocol.claim("remote-d", 2));
      assert.deepEqual([refused.status, refused.code], [401, "credential_revoked"]);
      assert.equal((await refusalOf(fresh.protocol.fetchBlob("a".repeat(64)))).code, "credential_revoked");
    });

    it("the host renews at two thirds of its certificate's lifetime without a restart; the old certificate is refused once the host is revoked", async () => {
      const { identity, protocol } = await enrolledHost("remote-e");
      const before = HostTlsIdentity.inMemory(identity.material);
      const renewals: RenewalEvent[] = [];
      const renewal = startCertificateRenewal({
        endpoint: hosts.origin,
        identity,
        clock: pkiClock,
        log: silentLogger,
        onEvent: (event) => renewals.push(event),
      });
      try {
        await pkiClock.advance((WEEK_SECONDS * 1000 * 2) / 3 - 600_000);
        assert.equal(renewals.length, 0, "nothing before two thirds of the lifetime");
        await pkiClock.advance(900_000);
        await eventually(() => renewals.length > 0);
        assert.equal(renewals[0]?.type, "certificate:renewed", JSON.stringify(renewals));
        assert.notEqual(identity.serial, before.serial, "a new certificate");
        assert.ok(identity.notAfter > before.notAfter);
        assert.notEqual(identity.material.keyPem, before.material.keyPem, "for a new key");
        // The same protocol object keeps working with the renewed certificate.
        assert.equal(await protocol.claim("remote-e", 2), null);
        const old = httpHostProtocol({ endpoint: hosts.origin, identity: before });
        assert.equal(
          await old.claim("remote-e", 2),
          null,
          "the old certificate is valid until it expires or is revoked",
        );

        // The identity inventory shows the renewed certificate.
        const operator = await operatorClient(t.app, t.storage, t.clock.now());
        const inventory = (await operator.get("/operator/api/identities")).json() as {
          identities: {
            role: string;
            host: string | null;
            serial?: string;
            certificates_live?: number;
            issued_via?: string;
          }[];
        };
        const entry = inventory.identities.find((i) => i.role === "host" && i.host === "remote-e");
        assert.equal(entry?.serial, identity.serial);
        assert.equal(entry?.issued_via, "renewal");
        assert.equal(entry?.certificates_live, 2);

        await revokeHost(t.storage, { hostId: "remote-e", revokedBy: "test", now: pkiClock.now() });
        assert.equal((await refusalOf(old.claim("remote-e", 2))).code, "credential_revoked");
        assert.equal((await refusalOf(protocol.claim("remote-e", 2))).code, "credential_revoked");
        const renewAfter = await refusalOf(
          requestRenewal(hosts.origin, identity, (await newKeyAndSigningRequest()).csrPem),
        );
        assert.equal(renewAfter.code, "credential_revoked", "a revoked host cannot renew itself back");
      } finally {
        renewal.stop();
      }
    });

    it("a host cannot report on another host's attempt, nor speak as another host", async () => {
      const holder = await enrolledHost("remote-f");
      const other = await enrolledHost("remote-g");
      const jobId = await submit();
      const placement = await holder.protocol.claim("remote-f", 2);
      assert.ok(placement !== null);
      assert.equal(placement.jobId, jobId);
      const ref = { jobId, attempt: placement.attempt, leaseToken: placement.leaseToken };

      for (const call of [
        () => other.protocol.heartbeat(ref),
        () => other.protocol.appendLogs(ref, [{ stream: "stdout", at: new Date().toISOString(), text: "forged" }]),
        () => other.protocol.registryCredentials(ref),
        () => other.protocol.finish(ref, passed),
      ]) {
        const refused = await refusalOf(call());
        assert.equal(refused.code, "not_found");
        assert.match(refused.detail, /host remote-g holds no attempt 1/);
      }
      const impersonated = await refusalOf(other.protocol.claim("remote-f", 2));
      assert.equal(impersonated.code, "invalid_request");
      assert.match(impersonated.detail, /this certificate is remote-g's/);
      const reenrolled = await refusalOf(
        other.protocol.enroll({ id: "remote-f", vcpus: 64, memoryBytes: 2 ** 40, isolation: "sandbox" }),
      );
      assert.equal(reenrolled.code, "invalid_request");

      // The holder's reports are taken: the forged line is not in the log.
      assert.equal(await holder.protocol.heartbeat(ref), "continue");
      assert.equal(
        await holder.protocol.appendLogs(ref, [{ stream: "stdout", at: new Date().toISOString(), text: "real" }]),
        "accepted",
      );
      assert.equal(await holder.protocol.finish(ref, passed), "finished");
      const { records } = await readLogRecords(t.storage.db, { jobId, afterSequence: 0, limit: 100 });
      assert.deepEqual(
        records.map((r) => r.text),
        ["real"],
      );
      assert.equal((await jobOf(t.storage, jobId)).job.status, "passed");
      // A finished attempt's late report, even from its holder, is stale as in-process.
      assert.equal(await holder.protocol.heartbeat(ref), "stale");
    });

    it("bodies are checked against the contract: a malformed message is invalid_request naming the field", async () => {
      const host = await enrolledHost("remote-h");
      const response = await host.identity.fetch(`${hosts.origin}${HOST_PROTOCOL_ROUTES.claim.path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ hostId: "remote-h", freeVcpus: 0 }),
      });
      assert.equal(response.status, 400);
      const refusal = (await response.json()) as { code: string; detail: string };
      assert.equal(refusal.code, "invalid_request");
      assert.match(refusal.detail, /^body\.freeVcpus /);
      const blob = await host.protocol.putBlob(Buffer.from("bytes on the wire"));
      assert.equal((await host.protocol.fetchBlob(blob.sha256)).toString(), "bytes on the wire");
      assert.equal((await refusalOf(host.protocol.fetchBlob("b".repeat(64)))).code, "not_found");
    });
  });
}

describe("kiln-server admin host (the operator's side of host identities)", () => {
  const MAIN = fileURLToPath(new URL("../src/main.js", import.meta.url));
  const run = promisify(execFile);

  it("enrollment-token --json prints a one-time token and the CA digest a kiln-host pins; revoke refuses the host's next request; the embedded host's id is not given out", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "kiln-admin-host-"));
    const hostDir = mkdtempSync(join(tmpdir(), "kiln-admin-host-data-"));
    const admin = async (...args: string[]) => {
      const { stdout } = await run(process.execPath, [MAIN, "admin", "host", ...args, "--json"], {
        env: { ...process.env, KILN_DATA_DIR: dataDir, KILN_DATABASE_URL: "", KILN_MASTER_KEY: "" },
      });
      return JSON.parse(stdout) as Record<string, unknown>;
    };
    const minted = await admin("enrollment-token", "builder-1", "--expires-in-seconds", "600");
    assert.equal(minted.host, "builder-1");
    assert.match(String(minted.enrollment_token), /^kiln_enroll_[0-9A-Za-z]{38}$/);
    assert.match(String(minted.ca_sha256), /^[0-9a-f]{64}$/);
    assert.ok(Date.parse(String(minted.expires_at)) > Date.now());
    await assert.rejects(admin("enrollment-token", "local"), /embedded host/);
    await assert.rejects(admin("enrollment-token", "no spaces"), /host id must match/);

    // The server on the same data dir and master key serves the CA the admin CLI made.
    const t = await testApp(await openStorage({ dataDir }), {
      clock: systemClock,
      secrets: new SecretBox(masterKey(dataDir, {})),
    });
    try {
      const hosts = await listenForHosts(t);
      assert.equal(hosts.listener.ca.certificateSha256, minted.ca_sha256);
      const config = {
        endpoint: hosts.origin,
        enrollmentToken: String(minted.enrollment_token),
        tlsFiles: tlsFilesIn(hostDir),
      };
      await assert.rejects(
        loadHostIdentity({ ...config, caSha256: "0".repeat(64) }, silentLogger),
        /not the one KILN_HOST_CA_SHA256 pins/,
        "a control plane presenting another CA gets no token",
      );
      const identity = await loadHostIdentity({ ...config, caSha256: String(minted.ca_sha256) }, silentLogger);
      assert.equal(identity.hostId, "builder-1");
      const protocol = httpHostProtocol({ endpoint: hosts.origin, identity });
      assert.equal(await protocol.claim("builder-1", 2), null);
      assert.deepEqual(await admin("revoke", "builder-1"), { host: "builder-1", revoked: 1 });
      assert.equal((await refusalOf(protocol.claim("builder-1", 2))).code, "credential_revoked");
      // A new bootstrap credential re-enrolls the revoked host, replacing the kept identity.
      const again = await admin("enrollment-token", "builder-1");
      const renewed = await loadHostIdentity(
        { ...config, enrollmentToken: String(again.enrollment_token), caSha256: String(again.ca_sha256) },
        silentLogger,
      );
      assert.notEqual(renewed.serial, identity.serial);
      assert.equal(await httpHostProtocol({ endpoint: hosts.origin, identity: renewed }).claim("builder-1", 2), null);
    } finally {
      await t.close();
      await rm(dataDir, { recursive: true, force: true });
      await rm(hostDir, { recursive: true, force: true });
    }
  });
});
