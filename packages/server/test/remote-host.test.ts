/**
 * A remote `kiln-host` against a listening control plane, on real storage of each dialect: the
 * host agent runs in this process but reaches the control plane only over HTTP (the host
 * protocol's HTTP binding) with its own credential, obtained by redeeming a one-time enrollment
 * token; the in-memory executor stands in for cargo. Also: credentials that must be refused,
 * and a host acting on another host's attempt.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type AttemptResult, HOST_PROTOCOL_ROUTES, silentLogger, systemClock } from "@kiln/contract";
import {
  DEFAULT_CRATES_IO_INDEX,
  type Executor,
  type HostEvent,
  type HostProtocol,
  HostProtocolRefusal,
  httpHostProtocol,
  type KilnHostConfig,
  type RunningKilnHost,
  redeemEnrollmentToken,
  startKilnHost,
} from "@kiln/host";
import { InMemoryExecutor } from "@kiln/host/testing";
import { onboardRepository, openStorage, readJob, readLogRecords, type Storage } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { mintToken } from "../src/auth/token-format.js";
import { mintHostEnrollmentToken, revokeHost } from "../src/hosts/host-identities.js";
import { bearer, personWithToken, type TestApp, testApp } from "./harness.js";
import { eventually, inlineSubmission } from "./job-fixtures.js";

const REPOSITORY = "acme/widget";

const passed: AttemptResult = {
  outcome: "passed",
  exitCode: 0,
  failure: null,
  report: { phases: [], crates: [], tests: [], unit: null },
  cargoOutput: null,
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

for (const dialect of DIALECTS) {
  describe(`remote kiln-host over the HTTP host protocol (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: TestApp;
    let endpoint: string;
    let owner: { tenant: string; token: string };
    let dataDir: string;
    let running: RunningKilnHost | null = null;
    let keys = 0;

    beforeEach(async () => {
      t = await testApp(await dialect.openFresh(), { clock: systemClock });
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      const address = t.app.server.address();
      assert.ok(address !== null && typeof address === "object");
      endpoint = `http://127.0.0.1:${address.port}`;
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
      const response = await fetch(`${endpoint}/api/v4/jobs`, {
        method: "POST",
        headers: { ...bearer(owner.token), "idempotency-key": `remote-${keys}`, "content-type": "application/json" },
        body: JSON.stringify(inlineSubmission(REPOSITORY)),
      });
      const jobId = (await response.json()) as string;
      assert.equal(response.status, 200, JSON.stringify(jobId));
      return jobId;
    };

    const enrollmentToken = async (hostId: string) =>
      (await mintHostEnrollmentToken(t.storage, { hostId, createdBy: "test", now: new Date() })).token;

    /** A host credential obtained over HTTP, and the protocol bound with it. */
    const enrolledHost = async (hostId: string): Promise<{ credential: string; protocol: HostProtocol }> => {
      const issued = await redeemEnrollmentToken(endpoint, await enrollmentToken(hostId));
      assert.equal(issued.hostId, hostId);
      const protocol = httpHostProtocol({ endpoint, credential: issued.credential });
      await protocol.enroll({ id: hostId, vcpus: 4, memoryBytes: 2 ** 33, isolation: "sandbox" });
      return { credential: issued.credential, protocol };
    };

    const jobOf = async (storage: Storage, jobId: string) => {
      const record = await readJob(storage.db, { tenantId: owner.tenant, jobId });
      assert.ok(record !== undefined);
      return record;
    };

    it("kiln-host enrolls with a one-time token, then claims a submitted job, ships its logs, fetches and puts blobs and finishes it, over HTTP only", async () => {
      const events: HostEvent[] = [];
      const inMemory = new InMemoryExecutor(systemClock);
      // What the sandbox would see: the source, materialized from blobs fetched over HTTP.
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
      const config: KilnHostConfig = {
        endpoint,
        credential: undefined,
        enrollmentToken: await enrollmentToken("remote-a"),
        credentialFile: join(dataDir, "host-credential"),
        dataDir,
        vcpus: 2,
        cratesIoIndex: DEFAULT_CRATES_IO_INDEX,
      };
      running = await startKilnHost(config, silentLogger, {
        executor,
        resolveToolchain: async (name) => ({ name, path: "/nonexistent/toolchain" }),
        lineages: null,
        scratchRoot: null,
        memoryBytes: 8 * 2 ** 30,
        onEvent: (event) => events.push(event),
      });
      assert.equal(running.hostId, "remote-a", "the credential names the host");
      const kept = join(dataDir, "host-credential");
      assert.match(await readFile(kept, "utf8"), /^kiln_host_[0-9A-Za-z]{38}\n$/);
      assert.equal((await stat(kept)).mode & 0o777, 0o600, "the credential is readable by the host's user only");

      const jobId = await submit();
      running.agent.wake();
      await eventually(() => events.some((e) => e.type === "attempt:end" && e.jobId === jobId), 30_000);
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
      // The source reached the sandbox through blob fetches over HTTP.
      assert.deepEqual(sources, ["pub fn f() {}\n"]);
      // The log lines were appended over HTTP, and the raw output put as a blob.
      const { records } = await readLogRecords(t.storage.db, { jobId, afterSequence: 0, limit: 100 });
      assert.ok(records.some((r) => r.text === "hello from a remote host"));
      const output = record.attempts[0]?.cargo_output_sha256;
      assert.ok(typeof output === "string" && (await t.deps.blobs.has(output)));
      assert.match((await t.deps.blobs.get(output)).toString(), /hello from a remote host/);

      // A restarted kiln-host finds its credential kept; the spent token is not needed again.
      await running.stop();
      running = await startKilnHost({ ...config, enrollmentToken: undefined }, silentLogger, {
        executor,
        resolveToolchain: async (name) => ({ name, path: "/nonexistent/toolchain" }),
        lineages: null,
        scratchRoot: null,
        memoryBytes: 8 * 2 ** 30,
      });
      assert.equal(running.hostId, "remote-a");
    });

    it("an enrollment token works once and not after it expired; unknown, malformed, tenant and revoked credentials are refused", async () => {
      const token = await enrollmentToken("remote-b");
      const issued = await redeemEnrollmentToken(endpoint, token);
      const again = await refusalOf(redeemEnrollmentToken(endpoint, token));
      assert.equal(again.code, "unauthenticated");
      assert.match(again.detail, /already redeemed/);

      const stale = await mintHostEnrollmentToken(t.storage, {
        hostId: "remote-late",
        createdBy: "test",
        ttlSeconds: 60,
        now: new Date(Date.now() - 3600_000),
      });
      const expired = await refusalOf(redeemEnrollmentToken(endpoint, stale.token));
      assert.equal(expired.code, "credential_expired");

      const claim = (credential: string) =>
        httpHostProtocol({ endpoint, credential }).claim(issued.hostId, 2) as Promise<unknown>;
      for (const credential of [mintToken("host"), "kiln_host_nonsense", owner.token, token]) {
        const refused = await refusalOf(claim(credential));
        assert.deepEqual([refused.status, refused.code], [401, "unauthenticated"], credential);
      }
      // A request without any credential, and a host credential presented to a tenant operation.
      const bare = await fetch(`${endpoint}${HOST_PROTOCOL_ROUTES.claim.path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ hostId: issued.hostId, freeVcpus: 2 }),
      });
      assert.equal(bare.status, 401);
      const tenantCall = await fetch(`${endpoint}/api/jobs`, { headers: bearer(issued.credential) });
      assert.equal(tenantCall.status, 401);

      // The host works until it is revoked; then every message is refused naming when.
      const protocol = httpHostProtocol({ endpoint, credential: issued.credential });
      assert.equal(await protocol.claim(issued.hostId, 2), null);
      const { revoked } = await revokeHost(t.storage, { hostId: issued.hostId, revokedBy: "test", now: new Date() });
      assert.equal(revoked, 1);
      const refused = await refusalOf(protocol.claim(issued.hostId, 2));
      assert.equal(refused.code, "credential_revoked");
      assert.equal((await refusalOf(protocol.fetchBlob("a".repeat(64)))).code, "credential_revoked");
    });

    it("a host cannot report on another host's attempt, nor speak as another host", async () => {
      const holder = await enrolledHost("remote-c");
      const other = await enrolledHost("remote-d");
      const jobId = await submit();
      const placement = await holder.protocol.claim("remote-c", 2);
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
        assert.match(refused.detail, /host remote-d holds no attempt 1/);
      }
      const impersonated = await refusalOf(other.protocol.claim("remote-c", 2));
      assert.equal(impersonated.code, "invalid_request");
      const reenrolled = await refusalOf(
        other.protocol.enroll({ id: "remote-c", vcpus: 64, memoryBytes: 2 ** 40, isolation: "sandbox" }),
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
      const host = await enrolledHost("remote-e");
      const response = await fetch(`${endpoint}${HOST_PROTOCOL_ROUTES.claim.path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${host.credential}`, "content-type": "application/json" },
        body: JSON.stringify({ hostId: "remote-e", freeVcpus: 0 }),
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

  it("enrollment-token --json prints a one-time token a kiln-host redeems; revoke refuses the host's next request; the embedded host's id is not given out", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "kiln-admin-host-"));
    const admin = async (...args: string[]) => {
      const { stdout } = await run(process.execPath, [MAIN, "admin", "host", ...args, "--json"], {
        env: { ...process.env, KILN_DATA_DIR: dataDir, KILN_DATABASE_URL: "" },
      });
      return JSON.parse(stdout) as Record<string, unknown>;
    };
    const minted = await admin("enrollment-token", "builder-1", "--expires-in-seconds", "600");
    assert.equal(minted.host, "builder-1");
    assert.match(String(minted.enrollment_token), /^kiln_enroll_[0-9A-Za-z]{38}$/);
    assert.ok(Date.parse(String(minted.expires_at)) > Date.now());
    await assert.rejects(admin("enrollment-token", "local"), /embedded host/);
    await assert.rejects(admin("enrollment-token", "no spaces"), /host id must match/);

    const t = await testApp(await openStorage({ dataDir }), { clock: systemClock });
    try {
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      const address = t.app.server.address();
      assert.ok(address !== null && typeof address === "object");
      const endpoint = `http://127.0.0.1:${address.port}`;
      const issued = await redeemEnrollmentToken(endpoint, String(minted.enrollment_token));
      assert.equal(issued.hostId, "builder-1");
      const protocol = httpHostProtocol({ endpoint, credential: issued.credential });
      assert.equal(await protocol.claim("builder-1", 2), null);
      assert.deepEqual(await admin("revoke", "builder-1"), { host: "builder-1", revoked: 1 });
      assert.equal((await refusalOf(protocol.claim("builder-1", 2))).code, "credential_revoked");
    } finally {
      await t.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
