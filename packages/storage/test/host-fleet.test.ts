import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  answerHostRead,
  type InitializationLedgerStep,
  listHostReceipts,
  listHostTransitions,
  readHostInitialization,
  recordHostFleetPoll,
  registerHost,
  registerHostDeployment,
  reportHostInitialization,
  requestHostRead,
  type Storage,
  startHostInitialization,
  takeHostReadAnswer,
} from "../src/index.js";
import { DIALECTS } from "./dialects.js";

/**
 * The fleet verbs (storage/src/hosts): initialization start, the host's poll and reports, the
 * deployment register, and the transitions and receipts they leave.
 */
const T0 = new Date("2026-11-22T07:00:00.000Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const step = (name: string, state: InitializationLedgerStep["state"]): InitializationLedgerStep => ({
  step: name,
  state,
  destructive: false,
  started_at: state === "pending" ? null : T0.toISOString(),
  finished_at: state === "succeeded" || state === "failed" ? T0.toISOString() : null,
});

for (const dialect of DIALECTS) {
  describe(`host fleet verbs [${dialect.name}]`, { skip: dialect.skip }, () => {
    async function withStorage(test: (storage: Storage) => Promise<void>) {
      const storage = await dialect.openFresh();
      try {
        await registerHost(storage, { id: "host-a", vcpus: 8, memoryBytes: 2 ** 33, isolation: "sandbox", now: T0 });
        await test(storage);
      } finally {
        await storage.close();
      }
    }
    const start = (
      storage: Storage,
      operation: string,
      hostId: string,
      now: Date,
      expectedRevision: number | null = null,
    ) =>
      storage.transaction((trx) =>
        startHostInitialization(trx, {
          operation,
          hostId,
          toolchains: ["stable"],
          steps: [step("sandbox_user", "pending")],
          expectedRevision,
          note: null,
          actor: "operator",
          action: "operator.hosts.initialization.start",
          now,
          rowLocks: storage.capabilities.rowLocks,
        }),
      );
    const report = (
      storage: Storage,
      operation: string,
      hostId: string,
      state: "running" | "succeeded" | "failed",
      now: Date,
    ) =>
      storage.transaction((trx) =>
        reportHostInitialization(trx, {
          hostId,
          operation,
          state,
          steps: [step("sandbox_user", state === "running" ? "running" : state)],
          failure: state === "failed" ? "step sandbox_user failed: no useradd" : null,
          receiptId: `receipt-${operation}`,
          now,
        }),
      );

    it("one open initialization per host; the host polls it, reports it, and a finished one is stale", async () => {
      await withStorage(async (storage) => {
        const first = await start(storage, "init-1", "host-a", at(1), 0);
        assert.equal(first.kind, "started");
        assert.equal(first.kind === "started" && first.enrolled, true);
        const second = await start(storage, "init-2", "host-a", at(1));
        assert.equal(second.kind, "conflict");
        assert.match(second.kind === "conflict" ? second.detail : "", /init-1 of host host-a is pending/);
        const staleRevision = await start(storage, "init-3", "host-a", at(1), 0);
        assert.equal(staleRevision.kind, "conflict", "the start moved the host's revision to 1");

        await requestHostRead(storage, {
          id: "read-1",
          hostId: "host-a",
          kind: "journal",
          path: null,
          maxBytes: 100,
          requestedBy: "operator",
          now: at(2),
        });
        assert.deepEqual(await recordHostFleetPoll(storage.db, { hostId: "host-a", sandboxes: ["j-a1"], now: at(2) }), {
          initialization: { operation: "init-1", toolchains: ["stable"] },
          reads: [{ id: "read-1", kind: "journal", path: null, maxBytes: 100, attempt: null, executions: null }],
        });
        assert.equal(
          await report(storage, "init-1", "host-b", "running", at(2)),
          "stale",
          "only its own host reports it",
        );
        assert.equal(await report(storage, "init-1", "host-a", "running", at(2)), "accepted");
        assert.equal((await readHostInitialization(storage, { hostId: "host-a" }))?.state, "running");
        assert.equal(await report(storage, "init-1", "host-a", "failed", at(3)), "accepted");
        assert.equal(
          await report(storage, "init-1", "host-a", "running", at(4)),
          "stale",
          "a finished one takes no report",
        );
        assert.equal(
          (await recordHostFleetPoll(storage.db, { hostId: "host-a", sandboxes: [], now: at(4) })).initialization,
          null,
        );

        const done = await readHostInitialization(storage, { hostId: "host-a" });
        assert.equal(done?.state, "failed");
        assert.equal(done?.failure, "step sandbox_user failed: no useradd");
        assert.equal(done?.finishedAt, at(3).toISOString());

        // A new one after it, started within the same millisecond, is the newest.
        assert.equal((await start(storage, "init-0", "host-a", at(3))).kind, "started");
        assert.equal((await readHostInitialization(storage, { hostId: "host-a" }))?.operation, "init-0");

        const receipts = await listHostReceipts(storage, { hostId: "host-a", limit: 10 });
        assert.deepEqual(
          receipts.map((r) => [r.kind, r.id, r.entries.map((e) => e.kind)]),
          [["initialization", "receipt-init-1", ["sandbox_user:failed"]]],
        );
        const transitions = (await listHostTransitions(storage, { limit: 10 })).map((t) => [t.action, t.from, t.to]);
        assert.deepEqual(transitions, [
          ["operator.hosts.initialization.start", "serving", "initializing"],
          ["host.initialization.finish", "initializing", "initialization_failed"],
          ["operator.hosts.initialization.start", "serving", "initializing"],
          ["host.enroll", "unenrolled", "serving"],
        ]);
      });
    });

    it("a read is answered once, by its own host, and taken once; one not answered by its deadline expires", async () => {
      await withStorage(async (storage) => {
        const request = (id: string) =>
          requestHostRead(storage, {
            id,
            hostId: "host-a",
            kind: "journal",
            path: null,
            maxBytes: 100,
            requestedBy: "operator",
            now: at(1),
          });
        const answer = (id: string, hostId: string) =>
          answerHostRead(storage, {
            id,
            hostId,
            outcome: "answered",
            content: "aGk=",
            truncated: false,
            detail: "2 bytes",
            refusal: null,
            now: at(2),
          });
        const deadline = at(30);
        await request("r1");
        assert.deepEqual(await takeHostReadAnswer(storage, { id: "r1", now: at(2), deadline }), { kind: "pending" });
        assert.equal(await answer("r1", "host-b"), "stale", "another host cannot answer it");
        assert.equal(await answer("r1", "host-a"), "accepted");
        assert.equal(await answer("r1", "host-a"), "stale", "answered once");
        const taken = await takeHostReadAnswer(storage, { id: "r1", now: at(3), deadline });
        assert.deepEqual(taken, {
          kind: "answered",
          content: "aGk=",
          truncated: false,
          detail: "2 bytes",
          answeredAt: at(2).toISOString(),
        });
        assert.deepEqual(
          await takeHostReadAnswer(storage, { id: "r1", now: at(3), deadline }),
          { kind: "expired" },
          "taken once",
        );

        await request("r2");
        assert.deepEqual(await takeHostReadAnswer(storage, { id: "r2", now: at(30), deadline }), { kind: "expired" });
        assert.equal(await answer("r2", "host-a"), "stale", "an answer after the wait ended is stale");
        assert.deepEqual(
          (await recordHostFleetPoll(storage.db, { hostId: "host-a", sandboxes: [], now: at(31) })).reads,
          [],
        );
      });
    });

    it("a host with no row yet may be initialized; it has no revision to name", async () => {
      await withStorage(async (storage) => {
        const named = await start(storage, "init-x", "host-new", at(1), 0);
        assert.equal(named.kind, "conflict");
        const started = await start(storage, "init-y", "host-new", at(1));
        assert.equal(started.kind === "started" && started.enrolled, false);
        const [newest] = await listHostTransitions(storage, { limit: 1 });
        assert.deepEqual(
          [newest?.host, newest?.from, newest?.to, newest?.revision],
          ["host-new", "unenrolled", "initializing", null],
        );
      });
    });

    it("a deployment moves the revision, keeps the serving state and is fenced on a named revision", async () => {
      await withStorage(async (storage) => {
        const register = (release: string, expectedRevision: number | null) =>
          storage.transaction((trx) =>
            registerHostDeployment(trx, {
              hostId: "host-a",
              release,
              sha256: null,
              expectedRevision,
              actor: "operator",
              action: "operator.hosts.deployment.register",
              reason: null,
              receiptId: `receipt-${release}`,
              now: at(1),
            }),
          );
        const first = await register("r1", 0);
        assert.equal(first.kind, "changed");
        assert.deepEqual(
          first.kind === "changed" && [first.host.revision, first.host.state, first.host.deployedRelease?.release],
          [1, "serving", "r1"],
        );
        const stale = await register("r2", 0);
        assert.deepEqual(stale, { kind: "conflict", state: "serving", revision: 1 });
        const unnamed = await register("r2", null);
        assert.equal(unnamed.kind === "changed" && unnamed.host.deployedRelease?.release, "r2");
        const missing = await storage.transaction((trx) =>
          registerHostDeployment(trx, {
            hostId: "nowhere",
            release: "r",
            sha256: null,
            expectedRevision: null,
            actor: "operator",
            action: "a",
            reason: null,
            receiptId: "receipt-none",
            now: at(1),
          }),
        );
        assert.deepEqual(missing, { kind: "not_found" });
        assert.equal(
          (await listHostReceipts(storage, { hostId: "nowhere", limit: 5 })).length,
          0,
          "no receipt for no host",
        );
      });
    });
  });
}
