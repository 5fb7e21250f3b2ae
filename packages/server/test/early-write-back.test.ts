/**
 * A test job's warm target disk is written back early, once, when cargo's build is finished and
 * its test binaries start (AttemptLineage.writeBackEarly, from run-cargo's first `Finished` line),
 * and the lineage's save waits for that write-back before its own: the embedded agent paired
 * in-process with the host service over real SQLite, an in-memory executor playing cargo's
 * stderr, and a real lineage store whose write-backs the test sees and holds back.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import { type HostAgent, type HostProtocol, type LineageLease, LineageStore } from "@kiln/host";
import { agentOnExecutor, InMemoryExecutor } from "@kiln/host/testing";
import { createTenant, readJob, type Storage } from "@kiln/storage";
import { openSqliteForTest } from "@kiln/storage/testing";
import { HostService } from "../src/domain/hosts/host-service.js";
import type { LocalHostEvent } from "../src/local-host.js";
import { testBlobs } from "../src/testing/harness.js";
import { acceptJob, eventually } from "../src/testing/job-fixtures.js";
import { inProcessHostProtocol } from "../src/web/host-protocol/in-process-host-protocol.js";

/** A lineage store that records each write-back and holds the first until the test lets it go. */
class WatchedLineageStore extends LineageStore {
  readonly writeBacks: { targetDir: string; done: boolean }[] = [];
  readonly checkIns: number[] = [];
  #releaseFirst: () => void = () => {};
  readonly #firstHeld = new Promise<void>((resolve) => {
    this.#releaseFirst = resolve;
  });

  releaseFirst(): void {
    this.#releaseFirst();
  }

  override async writeBack(lease: LineageLease): Promise<void> {
    const entry = { targetDir: lease.targetDir, done: false };
    this.writeBacks.push(entry);
    if (this.writeBacks.length === 1) await this.#firstHeld;
    entry.done = true;
  }

  override async checkIn(...args: Parameters<LineageStore["checkIn"]>): ReturnType<LineageStore["checkIn"]> {
    this.checkIns.push(this.writeBacks.length);
    return super.checkIn(...args);
  }
}

describe("a test job's early write-back of its warm target disk", () => {
  let storage: Storage;
  let scratch: string;
  let agent: HostAgent;
  let lineages: WatchedLineageStore;
  const clock = new ManualClock("2026-11-30T08:00:00.000Z");
  const events: LocalHostEvent[] = [];
  /** The JUnit report's blob, put just before the lineage's save (run-attempt.ts). */
  let junitPut = false;
  const executor = new InMemoryExecutor(clock, [
    {
      stdout: [
        "",
        "running 1 test",
        "test tests::it_works ... ok",
        "",
        "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
        "",
      ],
      stderr: [
        "   Compiling widget v0.1.0 (/workspace)",
        "    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.52s",
        "     Running unittests src/lib.rs (target/debug/deps/widget-0123456789abcdef)",
        // A test's own output that reads as cargo's: the build finished once, before it.
        "    Finished (printed by a test)",
      ],
      ends: { kind: "exit", code: 0 },
    },
  ]);

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), "kiln-early-write-back-"));
    storage = await openSqliteForTest();
    lineages = new WatchedLineageStore(join(scratch, "lineages"));
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
      putBlob: async (bytes) => {
        const stored = await bound.putBlob(bytes);
        if (Buffer.from(bytes).toString("utf8").includes("<testsuites")) junitPut = true;
        return stored;
      },
    };
    agent = agentOnExecutor(protocol, clock, {
      hostId: "early-write-back",
      executor,
      workRoot: join(scratch, "work"),
      lineages,
      vcpus: 4,
      memoryBytes: 8 * 2 ** 30,
      emit: (e) => events.push(e),
    });
    await agent.start();
  });

  after(async () => {
    lineages?.releaseFirst();
    await agent?.stop();
    await storage?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("writes back once at the build's end, and saves the lineage only after that write-back and its own", async () => {
    await createTenant(storage, { id: "acme", displayName: "acme" }, clock.now());
    const job = await acceptJob(storage, { tenant: "acme", now: clock.now() });
    agent.wake();

    // The build's `Finished` line started the early write-back, held back here. The JUnit report
    // is the last thing the attempt publishes before the save, which, once it is put, goes no
    // further than waiting for that write-back (a save that did not wait would have started its
    // own within the microtasks that follow, before the next turn of the event loop).
    await eventually(() => junitPut);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(lineages.writeBacks.length, 1, "one early write-back, however many `Finished` lines follow");
    assert.deepEqual(lineages.checkIns, [], "the save waits for the early write-back");
    assert.equal(events.filter((e) => e.type === "attempt:end").length, 0);

    lineages.releaseFirst();
    await eventually(() => events.some((e) => e.type === "attempt:end"));
    assert.deepEqual(
      lineages.writeBacks.map((w) => w.done),
      [true, true],
      "the early write-back, then the save's own",
    );
    assert.deepEqual(lineages.checkIns, [2], "checked in after both");
    assert.equal(lineages.writeBacks[0]?.targetDir, lineages.writeBacks[1]?.targetDir);
    assert.equal((await readJob(storage.db, { tenantId: "acme", jobId: job.id }))?.job.status, "passed");
  });
});
