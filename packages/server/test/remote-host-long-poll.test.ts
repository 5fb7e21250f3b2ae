/**
 * The long-poll claim of remote `kiln-host`s (issue 17, issue 21), over the real host listener
 * (HTTPS, mutual TLS, certificates from kiln's CA) on real storage of each dialect. The control
 * plane's clock and the hosts' clocks are ManualClocks that no test advances: no wait on either
 * side can end, nor any poll fire, by time — a host that takes a job submitted after it began
 * waiting can only have been woken by the storage notice the submission committed. Each test
 * waits for conditions (the service's events, a promise), never for a duration. Last, the
 * host service's release of a placement whose answer could not be written, per dialect.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { type AttemptClaimAnswer, silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { type HostEvent, httpHostProtocol, type RunningKilnHost, sandboxIsolation, startKilnHost } from "@kiln/host";
import { InMemoryExecutor } from "@kiln/host/testing";
import { drainHost, onboardRepository, readJob, type Storage, undrainHost, writeTenantControls } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { HostService, type HostServiceEvent } from "../src/domain/hosts/host-service.js";
import { SecretBox } from "../src/domain/secrets/secret-box.js";
import { bearer, personWithToken, type TestApp, testApp, testBlobs } from "../src/testing/harness.js";
import { acceptJob, eventually, inlineSubmission } from "../src/testing/job-fixtures.js";
import { listenForHosts, type TestHostListener } from "./host-listener-fixture.js";

const REPOSITORY = "acme/widget";

const inMemoryHost = {
  resolveToolchain: async (name: string) => ({ name, path: "/nonexistent/toolchain" }),
  lineages: null,
  scratchRoot: null,
  memoryBytes: 8 * 2 ** 30,
} as const;

/** One control plane: the app on its storage, listening publicly and for hosts, and what its host service reported. */
interface ControlPlane {
  readonly t: TestApp;
  readonly hosts: TestHostListener;
  readonly publicOrigin: string;
  readonly events: HostServiceEvent[];
}

async function startControlPlane(storage: Storage, clock: ManualClock, secrets?: SecretBox): Promise<ControlPlane> {
  const t = await testApp(storage, { clock, ...(secrets === undefined ? {} : { secrets }) });
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  const address = t.app.server.address();
  assert.ok(address !== null && typeof address === "object");
  const events: HostServiceEvent[] = [];
  const hosts = await listenForHosts(t, { clock, onEvent: (event) => events.push(event) });
  return { t, hosts, publicOrigin: `http://127.0.0.1:${address.port}`, events };
}

let keys = 0;
/** jobs.submit over the public API, as the CLI does. */
async function submit(plane: ControlPlane, token: string): Promise<string> {
  keys += 1;
  const response = await fetch(`${plane.publicOrigin}/api/v4/jobs`, {
    method: "POST",
    headers: { ...bearer(token), "idempotency-key": `long-poll-${keys}`, "content-type": "application/json" },
    body: JSON.stringify(inlineSubmission(REPOSITORY)),
  });
  const jobId = (await response.json()) as string;
  assert.equal(response.status, 200, JSON.stringify(jobId));
  return jobId;
}

/** A host enrolled over HTTPS, and the protocol bound to its identity (no agent). */
async function enrolledHost(plane: ControlPlane, hostId: string) {
  const identity = await plane.hosts.enroll(hostId);
  const protocol = httpHostProtocol({ endpoint: plane.hosts.origin, identity });
  await protocol.enroll({ id: hostId, vcpus: 4, memoryBytes: 2 ** 33, isolation: "sandbox" });
  return protocol;
}

/** Resolves once the control plane holds a claim of `hostId` waiting (after `from` events). */
const waitingOn = (plane: ControlPlane, hostId: string, from = 0) =>
  eventually(() => plane.events.slice(from).some((e) => e.type === "claim:waiting" && e.hostId === hostId));

const answeredOf = (plane: ControlPlane, hostId: string) =>
  plane.events.filter(
    (e): e is Extract<HostServiceEvent, { type: "claim:answered" }> =>
      e.type === "claim:answered" && e.hostId === hostId,
  );

async function statusOf(storage: Storage, tenantId: string, jobId: string) {
  const record = await readJob(storage.db, { tenantId, jobId });
  assert.ok(record !== undefined);
  return record;
}

for (const dialect of DIALECTS) {
  describe(`long-poll claims of remote hosts (${dialect.name})`, { skip: dialect.skip }, () => {
    let plane: ControlPlane;
    /** The control plane's clock: never advanced, so no wait ends and no recheck fires by time. */
    let serverClock: ManualClock;
    let owner: { tenant: string; token: string };
    let dataDir: string;
    let running: RunningKilnHost | null = null;

    beforeEach(async () => {
      serverClock = new ManualClock(new Date());
      plane = await startControlPlane(await dialect.openFresh(), serverClock);
      owner = await personWithToken(plane.t.storage);
      await onboardRepository(
        plane.t.storage,
        { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "test" },
        serverClock.now(),
      );
      dataDir = mkdtempSync(join(tmpdir(), "kiln-long-poll-"));
    });

    afterEach(async () => {
      await running?.stop();
      running = null;
      await plane.t.close();
      await rm(dataDir, { recursive: true, force: true });
    });

    it("a kiln-host waiting in a long-poll runs a job submitted after it began waiting, its own poll clock held", async () => {
      const hostClock = new ManualClock(new Date());
      const hostEvents: HostEvent[] = [];
      const executor = new InMemoryExecutor(hostClock);
      executor.script({ stdout: ["woken, not polled"], ends: { kind: "exit", code: 0 } });
      running = await startKilnHost(await plane.hosts.hostConfig("waiting-a", dataDir), silentLogger, {
        isolation: sandboxIsolation({ executor }),
        clock: hostClock,
        ...inMemoryHost,
        onEvent: (event) => hostEvents.push(event),
      });
      // The host's first claim found nothing and waits at the control plane.
      await waitingOn(plane, "waiting-a");
      assert.deepEqual(answeredOf(plane, "waiting-a"), [], "nothing answered yet: the claim is held");

      const jobId = await submit(plane, owner.token);
      await eventually(() => hostEvents.some((e) => e.type === "attempt:end" && e.jobId === jobId));
      assert.deepEqual(
        hostEvents.filter((e) => e.type === "attempt:end" || e.type.endsWith(":error")),
        [{ type: "attempt:end", jobId, attempt: 1, answer: "finished", outcome: "passed" }],
      );
      assert.deepEqual(answeredOf(plane, "waiting-a")[0], {
        type: "claim:answered",
        hostId: "waiting-a",
        jobId,
        idle: null,
        delivered: true,
        release: null,
      });
      const record = await statusOf(plane.t.storage, owner.tenant, jobId);
      assert.equal(record.job.status, "passed");
      assert.deepEqual(
        record.attempts.map((a) => a.host_id),
        ["waiting-a"],
      );
      // After its attempt the host waits again at once, still without its clock.
      await eventually(
        () => plane.events.filter((e) => e.type === "claim:waiting" && e.hostId === "waiting-a").length >= 2,
      );
    });

    it("a host that disconnects mid-wait is handed nothing: a job submitted afterwards stays claimable by another host", async () => {
      const leaving = await enrolledHost(plane, "leaving-b");
      const other = await enrolledHost(plane, "other-b");
      assert.ok(leaving.claimWaiting !== undefined);
      const withdraw = new AbortController();
      const claim = leaving.claimWaiting({ hostId: "leaving-b", freeVcpus: 2, waitMs: 25_000 }, withdraw.signal);
      await waitingOn(plane, "leaving-b");
      withdraw.abort();
      await assert.rejects(claim, "taken back before any answer: the call rejects");
      // The control plane saw the connection close and ended the wait without claiming.
      await eventually(() => answeredOf(plane, "leaving-b").length === 1);
      assert.deepEqual(answeredOf(plane, "leaving-b"), [
        {
          type: "claim:answered",
          hostId: "leaving-b",
          jobId: null,
          idle: "not_waiting",
          delivered: false,
          release: null,
        },
      ]);

      const jobId = await submit(plane, owner.token);
      assert.equal((await statusOf(plane.t.storage, owner.tenant, jobId)).job.status, "queued");
      const placement = await other.claim("other-b", 2);
      assert.equal(placement?.jobId, jobId, "another host takes it");
      const record = await statusOf(plane.t.storage, owner.tenant, jobId);
      assert.deepEqual(
        record.attempts.map((a) => [a.number, a.host_id]),
        [[1, "other-b"]],
        "the host that left was never placed an attempt",
      );
    });

    it("a drain ends a waiting claim with nothing; a drained host is answered at once; lifting the drain lets its claim take work", async () => {
      const host = await enrolledHost(plane, "drained-c");
      assert.ok(host.claimWaiting !== undefined);
      const waiting = host.claimWaiting(
        { hostId: "drained-c", freeVcpus: 2, waitMs: 25_000 },
        new AbortController().signal,
      );
      await waitingOn(plane, "drained-c");
      const drained = await plane.t.storage.transaction((trx) =>
        drainHost(trx, {
          hostId: "drained-c",
          actor: "test",
          action: "operator.hosts.drain",
          reason: null,
          now: serverClock.now(),
        }),
      );
      assert.equal(drained.kind, "changed");
      assert.deepEqual(await waiting, { placement: null, idle: "not_admitting" } satisfies AttemptClaimAnswer);

      // A job queued while the host drains is not placed on it, and it is told so without waiting.
      const jobId = await submit(plane, owner.token);
      const events = plane.events.length;
      assert.deepEqual(
        await host.claimWaiting({ hostId: "drained-c", freeVcpus: 2, waitMs: 25_000 }, new AbortController().signal),
        { placement: null, idle: "not_admitting" },
      );
      assert.ok(
        !plane.events.slice(events).some((e) => e.type === "claim:waiting"),
        "a drained host's claim does not wait",
      );
      assert.equal((await statusOf(plane.t.storage, owner.tenant, jobId)).job.status, "queued");

      const undrained = await plane.t.storage.transaction((trx) =>
        undrainHost(trx, {
          hostId: "drained-c",
          expectedRevision: drained.kind === "changed" ? drained.host.revision : -1,
          actor: "test",
          action: "operator.hosts.undrain",
          reason: null,
          now: serverClock.now(),
        }),
      );
      assert.equal(undrained.kind, "changed");
      const answer = await host.claimWaiting(
        { hostId: "drained-c", freeVcpus: 2, waitMs: 25_000 },
        new AbortController().signal,
      );
      assert.equal(answer.placement?.jobId, jobId);
    });

    it("a job waiting for its tenant's concurrency slot reaches a waiting host when the slot's job ends", async () => {
      const busy = await enrolledHost(plane, "busy-d");
      const idle = await enrolledHost(plane, "idle-d");
      await writeTenantControls(plane.t.storage, {
        tenantId: owner.tenant,
        expectedVersion: 0,
        changes: { maxRunningJobs: 1 },
        changedBy: "test",
        now: serverClock.now(),
      });
      const submitted = [await submit(plane, owner.token), await submit(plane, owner.token)];
      const placed = await busy.claim("busy-d", 2);
      assert.ok(placed !== null && idle.claimWaiting !== undefined);
      // Submitted at one instant of the held clock, the two are placed in id order: either may go first.
      const first = placed.jobId;
      const second = submitted.find((id) => id !== first);
      assert.ok(second !== undefined && submitted.includes(first));
      const waiting = idle.claimWaiting(
        { hostId: "idle-d", freeVcpus: 2, waitMs: 25_000 },
        new AbortController().signal,
      );
      await waitingOn(plane, "idle-d");
      assert.equal((await statusOf(plane.t.storage, owner.tenant, second)).job.status, "queued", "held by the limit");
      // The first job settles: its slot frees in that transaction, which tells waiting hosts.
      const ref = { jobId: first, attempt: placed.attempt, leaseToken: placed.leaseToken };
      assert.equal(
        await busy.finish(ref, {
          outcome: "passed",
          exitCode: 0,
          failure: null,
          report: { phases: [], crates: [], tests: [], unit: null },
          cargoOutput: null,
          lineageSave: null,
          artifacts: [],
        }),
        "finished",
      );
      assert.equal((await waiting).placement?.jobId, second);
    });
  });
}

const postgres = DIALECTS.find((d) => d.name === "postgres");

describe("long-poll claims across two servers on one PostgreSQL", { skip: postgres?.skip ?? "no postgres" }, () => {
  it("a host waiting on server A is woken by a job submitted through server B", async () => {
    assert.ok(postgres);
    const database = await postgres.createDatabase();
    const clockA = new ManualClock(new Date());
    const clockB = new ManualClock(new Date());
    // One deployment: both servers have the one master key (the CA's key is sealed under it).
    const secrets = new SecretBox(randomBytes(32));
    const planes: ControlPlane[] = [];
    try {
      const a = await startControlPlane(await database.open(), clockA, secrets);
      planes.push(a);
      const b = await startControlPlane(await database.open(), clockB, secrets);
      planes.push(b);
      const owner = await personWithToken(b.t.storage);
      await onboardRepository(
        b.t.storage,
        { tenantId: owner.tenant, name: REPOSITORY, onboardedBy: "test" },
        clockB.now(),
      );
      // Both servers issue host certificates with the one CA the database keeps.
      assert.equal(a.hosts.listener.ca.certificateSha256, b.hosts.listener.ca.certificateSha256);
      const host = await enrolledHost(a, "across-e");
      assert.ok(host.claimWaiting !== undefined);
      const waiting = host.claimWaiting(
        { hostId: "across-e", freeVcpus: 2, waitMs: 25_000 },
        new AbortController().signal,
      );
      await waitingOn(a, "across-e");
      const jobId = await submit(b, owner.token);
      const answer = await waiting;
      assert.equal(answer.placement?.jobId, jobId);
      assert.deepEqual(
        a.events.filter((e) => e.type === "claim:answered"),
        [{ type: "claim:answered", hostId: "across-e", jobId, idle: null, delivered: true, release: null }],
      );
    } finally {
      for (const plane of planes) await plane.t.close();
      await database.dispose();
    }
  });
});

/**
 * The host service's side of a claim whose answer could not be written (the binding's `deliver`
 * says so when the connection closed before the answer was handed to it whole): the placement is
 * released at once — never left to a lapsed lease — and another host's claim is attempt 1.
 */
for (const dialect of DIALECTS) {
  describe(`an undelivered placement is released (${dialect.name})`, { skip: dialect.skip }, () => {
    it("the job is queued again in its place, its attempt not counted, and another host takes it", async () => {
      const storage = await dialect.openFresh();
      try {
        const clock = new ManualClock(new Date());
        const events: HostServiceEvent[] = [];
        const service = new HostService({
          storage,
          blobs: testBlobs(),
          clock,
          log: silentLogger,
          onEvent: (event) => events.push(event),
        });
        const owner = await personWithToken(storage);
        const job = await acceptJob(storage, { tenant: owner.tenant, now: clock.now() });
        const offered: AttemptClaimAnswer[] = [];
        const unanswered = await service.answerClaim(
          { hostId: "gone-f", freeVcpus: 4, waitMs: 25_000 },
          {
            signal: new AbortController().signal,
            deliver: async (answer) => {
              offered.push(answer);
              return false;
            },
          },
        );
        assert.equal(unanswered.placement?.jobId, job.id, "the claim placed the job");
        assert.deepEqual(offered, [unanswered], "and offered it to the binding once");
        assert.deepEqual(events.at(-1), {
          type: "claim:answered",
          hostId: "gone-f",
          jobId: job.id,
          idle: null,
          delivered: false,
          release: "released",
        });
        const released = await readJob(storage.db, { tenantId: owner.tenant, jobId: job.id });
        assert.ok(released !== undefined);
        assert.deepEqual([released.job.status, released.attempts.length], ["queued", 0]);

        const taken = await service.answerClaim(
          { hostId: "present-f", freeVcpus: 4 },
          { signal: new AbortController().signal, deliver: async () => true },
        );
        assert.deepEqual([taken.placement?.jobId, taken.placement?.attempt], [job.id, 1]);
        const record = await readJob(storage.db, { tenantId: owner.tenant, jobId: job.id });
        assert.deepEqual(
          record?.attempts.map((a) => [a.number, a.host_id, a.state]),
          [[1, "present-f", "running"]],
        );

        // A host already gone when its claim comes up is placed nothing at all.
        const second = await acceptJob(storage, { tenant: owner.tenant, now: clock.now() });
        const gone = new AbortController();
        gone.abort();
        const nothing = await service.answerClaim(
          { hostId: "gone-f", freeVcpus: 4, waitMs: 25_000 },
          { signal: gone.signal, deliver: async () => false },
        );
        assert.deepEqual(nothing, { placement: null, idle: "not_waiting" });
        const untouched = await readJob(storage.db, { tenantId: owner.tenant, jobId: second.id });
        assert.deepEqual([untouched?.job.status, untouched?.attempts.length], ["queued", 0]);
      } finally {
        await storage.close();
      }
    });
  });
}
