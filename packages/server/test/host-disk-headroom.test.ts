/**
 * A host claims an attempt only while its free disk covers the attempt's disk quota (issue 33):
 * the embedded agent paired in-process with the host service over real SQLite, its work root on
 * a 40 MiB tmpfs mounted for the test (so the free space is known exactly and nothing else
 * writes there), an in-memory executor granting each attempt at most 16 MiB of disk, and 16
 * vCPUs — room for eight 2-vCPU attempts by vCPU, for two by disk.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import type { HostAgent, HostProtocol } from "@kiln/host";
import { agentOnExecutor, InMemoryExecutor } from "@kiln/host/testing";
import { createTenant, readJob, requestCancellation, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import { HostService } from "../src/domain/hosts/host-service.js";
import type { LocalHostEvent } from "../src/local-host.js";
import { testBlobs } from "../src/testing/harness.js";
import { acceptJob, eventually } from "../src/testing/job-fixtures.js";
import { inProcessHostProtocol } from "../src/web/host-protocol/in-process-host-protocol.js";

const MiB = 2 ** 20;

describe("a host's claims and its free disk (40 MiB tmpfs work root, 16 MiB per attempt)", () => {
  let storage: Storage;
  let workRoot: string;
  let agent: HostAgent;
  const clock = new ManualClock("2026-11-24T12:00:00.000Z");
  const events: LocalHostEvent[] = [];
  const jobs: { tenant: string; job: { id: string } }[] = [];
  /** Every claim the agent made: the free disk it said, and whether it got an attempt. */
  const claims: { freeDiskBytes: number | undefined; placed: boolean }[] = [];
  /**
   * Waits for `condition`, moving the clock half a second at a time: the agent's polls and
   * heartbeats fire whenever they were scheduled, however late a loaded machine got to schedule
   * them (one advance made before a timer was set would leave the wait hanging).
   */
  const advanceUntil = async (condition: () => boolean) => {
    while (!condition()) await clock.advance(500);
  };
  const placedClaims = () => claims.filter((c) => c.placed).length;
  const executor = Object.assign(new InMemoryExecutor(clock, [], { ends: { kind: "hang" } }), {
    disk: { maxAttemptBytes: 16 * MiB },
  });

  before(async () => {
    workRoot = mkdtempSync(join(tmpdir(), "kiln-disk-headroom-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=40m,mode=0755", "kiln-disk-headroom", workRoot]);
    storage = await openSqliteForTest();
    const service = new HostService({
      storage,
      blobs: testBlobs(),
      clock,
      log: silentLogger,
      onEvent: (e) => events.push(e),
    });
    const bound = inProcessHostProtocol(service);
    const protocol: HostProtocol = {
      ...bound,
      claim: async (host, free, freeDiskBytes) => {
        const placement = await bound.claim(host, free, freeDiskBytes);
        claims.push({ freeDiskBytes, placed: placement !== null });
        return placement;
      },
    };
    agent = agentOnExecutor(protocol, clock, {
      hostId: "small-disk",
      executor,
      workRoot,
      vcpus: 16,
      memoryBytes: 32 * 2 ** 30,
      emit: (e) => events.push(e),
    });
    await agent.start();
  });

  after(async () => {
    // The attempts still running hang until cancelled; the agent stops once they have ended.
    for (const { tenant, job } of jobs) {
      if ((await readJob(storage.db, { tenantId: tenant, jobId: job.id }))?.job.status !== "running") continue;
      await requestCancellation(storage, { tenantId: tenant, jobId: job.id, by: "u_test", now: clock.now() });
    }
    // Every placed claim's attempt ends (attempt:end, or attempt:error when its result could not be
    // reported), whether or not it had reached the executor.
    await advanceUntil(
      () => events.filter((e) => e.type === "attempt:end" || e.type === "attempt:error").length === placedClaims(),
    );
    await agent?.stop();
    await storage?.close();
    execFileSync("umount", [workRoot]);
    rmdirSync(workRoot);
  });

  it("claims two attempts, not the third its vCPUs would allow, and the third once one ends", async () => {
    for (const name of ["a", "b", "c"]) {
      // A tenant each: no tenant's own concurrency bound takes part.
      const tenant = `disk${process.pid}${name}`;
      await createTenant(storage, { id: tenant, displayName: tenant }, clock.now());
      jobs.push({ tenant, job: await acceptJob(storage, { tenant, now: clock.now() }) });
    }
    agent.wake();
    // A placed attempt reaches the executor only after its sandbox is prepared, which on a loaded
    // machine can come after the claim that found no room: wait for both (or for an attempt that
    // ended before it ran, which the assertions below then name).
    await eventually(
      () =>
        claims.some((c) => !c.placed) &&
        (executor.requests.length >= placedClaims() || events.some((e) => e.type === "attempt:end")),
    );
    assert.equal(executor.requests.length, 2, "two attempts of 16 MiB fit 40 MiB; a third does not");
    assert.deepEqual(
      claims.map((c) => c.placed),
      [true, true, false],
    );
    assert.equal(claims[0]?.freeDiskBytes, undefined, "40 MiB free covers any attempt: disk does not limit the claim");
    const third = claims[2]?.freeDiskBytes;
    assert.ok(third !== undefined && third < 16 * MiB && third > 0, `the third claim said ${third} bytes free`);
    const statuses = async () =>
      Promise.all(
        jobs.map(
          async ({ tenant, job }) => (await readJob(storage.db, { tenantId: tenant, jobId: job.id }))?.job.status,
        ),
      );
    assert.deepEqual((await statuses()).sort(), ["queued", "running", "running"]);

    // One attempt ends (cancelled): its 16 MiB are free again, and the queued job is placed.
    const running = executor.requests[0];
    assert.ok(running !== undefined);
    const ended = jobs.find(({ job }) => running.attemptId.startsWith(job.id));
    assert.ok(ended !== undefined);
    const before = claims.length;
    await requestCancellation(storage, { tenantId: ended.tenant, jobId: ended.job.id, by: "u_test", now: clock.now() });
    await advanceUntil(() => executor.requests.length === 3);
    assert.ok(claims.slice(before).some((c) => c.placed));
    assert.equal(events.filter((e) => e.type === "attempt:error" || e.type === "claim:error").length, 0);
  });
});
