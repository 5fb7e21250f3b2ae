/**
 * The host agent paired in-process with the control plane's host service over real storage,
 * with an in-memory executor and a manual clock: lease loss, cancellation, a stale finish, a
 * provisioning failure, a host error, a claim error and a report the service refuses, each in
 * milliseconds and without bubblewrap (the sandbox executor has its own suite).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync } from "node:fs";
import { readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import { type AttemptResult, type SourceEntry, silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import type { HostAgent, HostProtocol } from "@kiln/host";
import { agentOnExecutor, InMemoryExecutor } from "@kiln/host/testing";
import { type BlobStore, createTenant, readJob, requestCancellation, type Storage } from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import { HostService } from "../src/domain/hosts/host-service.js";
import { startLeaseReaper } from "../src/domain/scheduler/lease-reaper.js";
import type { LocalHostEvent } from "../src/local-host.js";
import { testBlobs } from "../src/testing/harness.js";
import { acceptJob, eventually } from "../src/testing/job-fixtures.js";
import { inProcessHostProtocol } from "../src/web/host-protocol/in-process-host-protocol.js";

/** Faults a test injects into the agent's side of the protocol. */
interface Faults {
  heartbeat: Error | null;
  claim: Error | null;
  fetchBlob: Error | null;
}

interface Pairing {
  storage: Storage;
  blobs: BlobStore;
  clock: ManualClock;
  service: HostService;
  executor: InMemoryExecutor;
  agent: HostAgent;
  events: LocalHostEvent[];
  faults: Faults;
  tenant: string;
  stop(): Promise<void>;
}

let tenants = 0;

async function pair(storage: Storage): Promise<Pairing> {
  const clock = new ManualClock("2026-11-24T12:00:00.000Z");
  const events: LocalHostEvent[] = [];
  const emit = (event: LocalHostEvent) => events.push(event);
  const blobs = testBlobs();
  const service = new HostService({
    storage,
    blobs,
    clock,
    log: silentLogger,
    onEvent: emit,
  });
  const bound = inProcessHostProtocol(service);
  const faults: Faults = { heartbeat: null, claim: null, fetchBlob: null };
  const protocol: HostProtocol = {
    ...bound,
    heartbeat: (ref) => (faults.heartbeat === null ? bound.heartbeat(ref) : Promise.reject(faults.heartbeat)),
    claim: (host, free, freeDisk) => {
      const fault = faults.claim;
      faults.claim = null;
      return fault === null ? bound.claim(host, free, freeDisk) : Promise.reject(fault);
    },
    fetchBlob: (sha256) => (faults.fetchBlob === null ? bound.fetchBlob(sha256) : Promise.reject(faults.fetchBlob)),
  };
  const executor = new InMemoryExecutor(clock);
  // A work root other users may traverse, as <data dir>/attempts is: each attempt must close its own.
  const workRoot = mkdtempSync(join(tmpdir(), "kiln-pairing-"));
  chmodSync(workRoot, 0o755);
  const agent = agentOnExecutor(protocol, clock, {
    hostId: "memory-host",
    executor,
    workRoot,
    vcpus: 2,
    memoryBytes: 8 * 2 ** 30,
    emit,
  });
  const reaper = startLeaseReaper({
    storage,
    clock,
    log: silentLogger,
    onReclaimed: () => agent.wake(),
    onFailure: emit,
  });
  tenants += 1;
  const tenant = `pair${process.pid}x${tenants}`;
  await createTenant(storage, { id: tenant, displayName: tenant }, clock.now());
  await agent.start();
  return {
    storage,
    blobs,
    clock,
    service,
    executor,
    agent,
    events,
    faults,
    tenant,
    stop: async () => {
      await reaper.stop();
      await agent.stop();
      await rm(workRoot, { recursive: true, force: true });
    },
  };
}

const ended = (p: Pairing, jobId: string, attempt: number) =>
  p.events.find((e) => e.type === "attempt:end" && e.jobId === jobId && e.attempt === attempt);

async function jobOf(p: Pairing, jobId: string) {
  const record = await readJob(p.storage.db, { tenantId: p.tenant, jobId });
  assert.ok(record !== undefined, `job ${jobId} exists`);
  return record;
}

// SQLite only: better-sqlite3 answers within the promise jobs a ManualClock lets settle between
// timers, so each advance runs exactly the loops it passes; the queue verbs' behaviour on
// PostgreSQL is the storage suite's (packages/storage/test), per dialect.
const SQLITE = DIALECTS.filter((dialect) => dialect.name === "sqlite");

for (const dialect of SQLITE) {
  describe(`host agent paired with the host service (${dialect.name}, in-memory executor, manual clock)`, () => {
    let storage: Storage;
    let p: Pairing;
    beforeEach(async () => {
      storage = await dialect.openFresh();
      p = await pair(storage);
    });
    afterEach(async () => {
      await p.stop();
      await storage.close();
    });

    it("a job runs, reports and settles once: passed, with usage metered on the manual clock", async () => {
      p.executor.script({ stdout: ["hello"], runsForMs: 4000, ends: { kind: "exit", code: 0 } });
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      p.agent.wake();
      await eventually(() => p.executor.requests.length === 1);
      await p.clock.advance(4000);
      await eventually(() => ended(p, job.id, 1) !== undefined);
      assert.deepEqual(ended(p, job.id, 1), {
        type: "attempt:end",
        jobId: job.id,
        attempt: 1,
        answer: "finished",
        outcome: "passed",
      });
      const record = await jobOf(p, job.id);
      assert.equal(record.job.status, "passed");
      assert.deepEqual(JSON.parse(record.job.usage ?? "null")?.vcpu_seconds, 8);
      assert.equal(p.events.filter((e) => e.type === "attempt:error").length, 0);
    });

    it("a running attempt's directories are its own: 0700, and another user of the host cannot read its source", async () => {
      p.executor.script({ ends: { kind: "hang" } });
      const content = Buffer.from("tenant secret\n");
      const stored = await p.blobs.put(content);
      const source: SourceEntry[] = [
        { path: "secret.txt", sha256: stored.sha256, bytes: content.length, executable: false },
      ];
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now(), source });
      p.agent.wake();
      await eventually(() => p.executor.requests.length === 1);
      const request = p.executor.requests[0];
      assert.ok(request !== undefined);
      const attemptDir = dirname(request.targetDir);
      assert.equal((await stat(attemptDir)).mode & 0o777, 0o700);
      const secret = join(request.workspaceDir, "secret.txt");
      assert.equal(await readFile(secret, "utf8"), "tenant secret\n", "the file is there for the sandbox");
      const other = spawnSync("runuser", ["-u", "nobody", "--", "cat", secret], { encoding: "utf8" });
      assert.notEqual(other.status, 0, `another user read the tenant's file: ${other.stdout}`);
      assert.match(other.stderr, /Permission denied/);
      await requestCancellation(storage, { tenantId: p.tenant, jobId: job.id, by: "u_test", now: p.clock.now() });
      await p.clock.advance(2000);
      await eventually(() => ended(p, job.id, 1) !== undefined);
    });

    it("an attempt whose provisioning throws fails the job on its first attempt with that phase and cause", async () => {
      p.faults.fetchBlob = new Error("blob store unreachable: connection refused");
      const source: SourceEntry[] = [{ path: "src/lib.rs", sha256: "a".repeat(64), bytes: 3, executable: false }];
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now(), source });
      p.agent.wake();
      await eventually(() => ended(p, job.id, 1) !== undefined);
      const record = await jobOf(p, job.id);
      assert.equal(record.job.status, "failed");
      assert.equal(record.job.attempts_started, 1, "not re-queued");
      const failure = JSON.parse(record.job.failure ?? "null");
      assert.equal(failure.phase, "provision");
      assert.equal(failure.cause, "infrastructure");
      assert.match(failure.detail, /blob store unreachable: connection refused/);
      assert.equal(p.executor.requests.length, 0, "cargo never ran");
      const error = p.events.find((e) => e.type === "attempt:error");
      assert.ok(error !== undefined && error.type === "attempt:error");
      assert.equal(error.phase, "provision");
      assert.match(String(error.error), /blob store unreachable/);
    });

    it("a host whose heartbeats stop loses its lease: the job is re-placed as attempt 2, and the old attempt's late report is stale", async () => {
      p.executor.script({ ends: { kind: "hang" } });
      p.executor.script({ ends: { kind: "exit", code: 0 } });
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      p.faults.heartbeat = new Error("network partition");
      p.agent.wake();
      await eventually(() => p.executor.requests.length === 1);
      // 15 s lease, reaper every 3 s: by 18 s attempt 1 is lost; the reclaim wakes the agent,
      // which has no free vCPU while attempt 1 still hangs.
      await p.clock.advance(18_000);
      await eventually(() => p.events.some((e) => e.type === "heartbeat:error"));
      let record = await jobOf(p, job.id);
      assert.equal(record.job.status, "queued");
      assert.equal(record.attempts[0]?.state, "lost");
      // The partition heals: attempt 1's next heartbeat hears `stale` and stops without reporting.
      p.faults.heartbeat = null;
      await p.clock.advance(2000);
      await eventually(() => ended(p, job.id, 1) !== undefined);
      const late = ended(p, job.id, 1);
      assert.ok(late?.type === "attempt:end");
      assert.equal(late.answer, "stale");
      // Its vCPUs are free again: attempt 2 is placed at once and passes.
      await eventually(() => ended(p, job.id, 2) !== undefined);
      record = await jobOf(p, job.id);
      assert.equal(record.job.status, "passed");
      assert.equal(record.job.attempts_started, 2);
      assert.deepEqual(
        record.attempts.map((a) => [a.number, a.state, a.outcome]),
        [
          [1, "lost", "lost"],
          [2, "finished", "passed"],
        ],
      );
      assert.equal(JSON.parse(record.job.settlement ?? "null")?.attempts, 2);
    });

    it("a cancellation reaches the running attempt at its next heartbeat: the job ends cancelled, metered to the request", async () => {
      p.executor.script({ ends: { kind: "hang" } });
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      p.agent.wake();
      await eventually(() => p.executor.requests.length === 1);
      await p.clock.advance(1000);
      const cancelled = await requestCancellation(storage, {
        tenantId: p.tenant,
        jobId: job.id,
        by: "u_test",
        now: p.clock.now(),
      });
      assert.deepEqual(cancelled, { kind: "requested", status: "cancellation_requested" });
      await p.clock.advance(2000);
      await eventually(() => ended(p, job.id, 1) !== undefined);
      const record = await jobOf(p, job.id);
      assert.equal(record.job.status, "cancelled");
      assert.equal(JSON.parse(record.job.failure ?? "null")?.cause, "cancelled");
      assert.equal(JSON.parse(record.job.usage ?? "null")?.seconds, 1, "metering closed at the request");
      assert.equal(p.executor.requests[0]?.signal.aborted, true);
    });

    it("a finish with a lease that is no longer current is stale and changes nothing", async () => {
      p.executor.script({ ends: { kind: "exit", code: 0 } });
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      p.agent.wake();
      await eventually(() => ended(p, job.id, 1) !== undefined);
      const before = await jobOf(p, job.id);
      const result: AttemptResult = {
        outcome: "failed",
        exitCode: 101,
        failure: { phase: "test", cause: "test_failure", detail: "1 test(s) failed" },
        report: { phases: [], crates: [], tests: [], unit: null },
        cargoOutput: null,
        lineageSave: null,
        artifacts: [],
      };
      assert.equal(await p.service.finish({ jobId: job.id, attempt: 1, leaseToken: "not-the-lease" }, result), "stale");
      const attempt = before.attempts[0];
      assert.ok(attempt !== undefined);
      assert.equal(
        await p.service.finish({ jobId: job.id, attempt: 1, leaseToken: attempt.lease_token }, result),
        "stale",
        "an attempt that already finished cannot finish again",
      );
      const after = await jobOf(p, job.id);
      assert.equal(after.job.status, "passed");
      assert.equal(after.job.settlement, before.job.settlement);
    });

    it("an executor that cannot run the attempt fails the job on its first attempt with cause infrastructure and why", async () => {
      p.executor.script({ ends: { kind: "infrastructure", detail: "bwrap: setting up uid map: Permission denied" } });
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      p.agent.wake();
      await eventually(() => ended(p, job.id, 1) !== undefined);
      const record = await jobOf(p, job.id);
      assert.equal(record.job.status, "failed");
      assert.equal(record.job.attempts_started, 1);
      const failure = JSON.parse(record.job.failure ?? "null");
      assert.equal(failure.cause, "infrastructure");
      assert.match(failure.detail, /uid map: Permission denied/);
    });

    it("an executor that throws is a host failure in the test phase, reported, not a lapsed lease", async () => {
      p.executor.script({ ends: { kind: "throw", error: new Error("cgroup directory vanished") } });
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      p.agent.wake();
      await eventually(() => ended(p, job.id, 1) !== undefined);
      const record = await jobOf(p, job.id);
      assert.equal(record.job.status, "failed");
      const failure = JSON.parse(record.job.failure ?? "null");
      assert.deepEqual([failure.phase, failure.cause], ["test", "infrastructure"]);
      assert.match(failure.detail, /cgroup directory vanished/);
      assert.ok(p.events.some((e) => e.type === "attempt:error" && e.phase === "test"));
    });

    it("a claim the control plane does not answer is reported, and the next poll claims", async () => {
      p.faults.claim = new Error("database is restarting");
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      p.agent.wake();
      await eventually(() => p.events.some((e) => e.type === "claim:error"));
      assert.equal(p.executor.requests.length, 0);
      await p.clock.advance(500);
      await eventually(() => ended(p, job.id, 1) !== undefined);
      assert.equal((await jobOf(p, job.id)).job.status, "passed");
    });

    it("a report that does not match the protocol fails the job naming the violation; the service says so", async () => {
      // Claimed by the service directly: the agent stops first, so no attempt of its own races this one.
      await p.agent.stop();
      const job = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      const placement = await p.service.claim("other-host", 16);
      assert.ok(placement !== null && placement.jobId === job.id);
      const answer = await p.service.finish(placement, {
        outcome: "passed",
        exitCode: 0,
        failure: null,
        report: { phases: "none", crates: [], tests: [], unit: null },
        cargoOutput: null,
        lineageSave: null,
        artifacts: [],
      } as unknown as AttemptResult);
      assert.equal(answer, "finished");
      const record = await jobOf(p, job.id);
      assert.equal(record.job.status, "failed");
      const failure = JSON.parse(record.job.failure ?? "null");
      assert.deepEqual([failure.phase, failure.cause], ["report", "infrastructure"]);
      assert.match(failure.detail, /\/report\/phases/);
      assert.ok(p.events.some((e) => e.type === "report:invalid" && e.jobId === job.id));
    });

    it("a job whose stored admission does not match its schema fails at placement, and the next job is placed", async () => {
      // The agent stops first: a job's notice wakes it, and it would claim the good job itself.
      await p.agent.stop();
      const broken = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now(), admitted: "{}" });
      await p.clock.advance(1000); // queued after it: placement takes the oldest first
      const good = await acceptJob(storage, { tenant: p.tenant, now: p.clock.now() });
      const placement = await p.service.claim("other-host", 16);
      assert.equal(placement?.jobId, good.id);
      const record = await jobOf(p, broken.id);
      assert.equal(record.job.status, "failed");
      assert.match(JSON.parse(record.job.failure ?? "null")?.detail, /admission record does not match its schema/);
      assert.ok(p.events.some((e) => e.type === "placement:unplaceable" && e.jobId === broken.id));
    });
  });
}
