import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  claimNextJob,
  drainHost,
  insertJob,
  listHostRecords,
  readHostRecord,
  registerHost,
  type Storage,
  undrainHost,
} from "../src/index.js";
import { queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";
import { blockedOrSettled, deferred, held, withTenantAndHosts } from "./staged-transactions.js";

/**
 * Operator drain as the claim verb enforces it (host-drain.ts, claim-next-job.ts): a draining
 * host's claims get no new job, its running attempts are untouched, and a drain racing a claim
 * is ordered — staged with one transaction held open, never by timing.
 */
const T0 = new Date("2026-11-22T07:00:00.000Z");
const TENANT = "acme";
const SIZE = "kiln2-cpu";
const NO_HANG = { timeout: 30 * 60_000 };
let submissions = 0;

for (const dialect of DIALECTS) {
  describe(`host drain [${dialect.name}]`, { skip: dialect.skip }, () => {
    const withHosts = (test: (main: Storage, other: Storage) => Promise<void>) =>
      withTenantAndHosts(dialect, { tenant: TENANT, hosts: ["host-a", "host-b"], now: T0 }, test);

    const drain = (storage: Storage, hostId: string) =>
      storage.transaction((trx) =>
        drainHost(trx, { hostId, actor: "op", action: "operator.hosts.drain", reason: null, now: T0 }),
      );
    const undrain = (storage: Storage, hostId: string, expectedRevision: number) =>
      storage.transaction((trx) =>
        undrainHost(trx, {
          hostId,
          expectedRevision,
          actor: "op",
          action: "operator.hosts.undrain",
          reason: null,
          now: T0,
        }),
      );

    it("a draining host claims nothing; its running attempt continues; undrain names the revision", async () => {
      await withHosts(async (storage) => {
        const first = await enqueue(storage);
        assert.equal((await claim(storage, "host-a"))?.job.id, first);
        const drained = await drain(storage, "host-a");
        assert.equal(drained.kind, "changed");
        assert.equal(drained.kind === "changed" && drained.host.revision, 1);
        assert.equal(drained.kind === "changed" && drained.host.runningAttempts, 1);

        const second = await enqueue(storage);
        assert.equal(await claim(storage, "host-a"), undefined, "no new job for a draining host");
        const attempt = await storage.db
          .selectFrom("attempts")
          .select(["host_id", "state"])
          .where("job_id", "=", first)
          .executeTakeFirstOrThrow();
        assert.deepEqual(attempt, { host_id: "host-a", state: "running" }, "the running attempt stays");

        assert.deepEqual(await drain(storage, "host-a"), { kind: "conflict", state: "draining", revision: 1 });
        assert.deepEqual(await undrain(storage, "host-a", 0), { kind: "conflict", state: "draining", revision: 1 });
        assert.deepEqual(await undrain(storage, "host-b", 0), { kind: "conflict", state: "serving", revision: 0 });
        assert.deepEqual(await drain(storage, "nowhere"), { kind: "not_found" });
        assert.equal(await claim(storage, "host-a"), undefined);

        const back = await undrain(storage, "host-a", 1);
        assert.equal(back.kind === "changed" && back.host.state, "serving");
        assert.equal((await claim(storage, "host-a"))?.job.id, second);
        assert.equal((await readHostRecord(storage, "host-a"))?.revision, 2);
        assert.deepEqual(
          (await listHostRecords(storage)).map((h) => [h.id, h.state, h.runningAttempts]),
          [
            ["host-a", "serving", 2],
            ["host-b", "serving", 0],
          ],
        );
      });
    });

    it("re-enrolling (registerHost again) leaves a drain in place", async () => {
      await withHosts(async (storage) => {
        await drain(storage, "host-a");
        await registerHost(storage, { id: "host-a", vcpus: 32, memoryBytes: 2 ** 36, isolation: "sandbox", now: T0 });
        await enqueue(storage);
        assert.equal(await claim(storage, "host-a"), undefined);
        assert.equal((await readHostRecord(storage, "host-a"))?.state, "draining");
      });
    });

    it("a claim racing an uncommitted drain waits for it and then places nothing", NO_HANG, async () => {
      await withHosts(async (main, other) => {
        await enqueue(main);
        const reached = deferred();
        const gate = deferred();
        const draining = main.transaction(async (trx) => {
          const r = await drainHost(trx, {
            hostId: "host-a",
            actor: "op",
            action: "operator.hosts.drain",
            reason: null,
            now: T0,
          });
          reached.resolve();
          await gate.promise;
          return r;
        });
        await reached.promise;
        const claiming = claim(other, "host-a");
        assert.equal(await blockedOrSettled(main, claiming), "pending", "the claim waits for the drain");
        gate.resolve();
        assert.equal((await draining).kind, "changed");
        assert.equal(await claiming, undefined, "the claim saw the committed drain");
      });
    });

    it("a drain racing an uncommitted claim waits for it; the placed attempt keeps running", NO_HANG, async () => {
      await withHosts(async (main, other) => {
        const job = await enqueue(main);
        const holding = held(other);
        const claiming = claim(holding.storage, "host-a");
        await holding.ready;
        const draining = drain(main, "host-a");
        assert.equal(await blockedOrSettled(main, draining), "pending", "the drain waits for the claim");
        holding.release();
        assert.equal((await claiming)?.job.id, job);
        const drained = await draining;
        assert.equal(drained.kind === "changed" && drained.host.runningAttempts, 1);
        await enqueue(main);
        assert.equal(await claim(main, "host-a"), undefined);
      });
    });
  });
}

async function enqueue(storage: Storage): Promise<string> {
  submissions += 1;
  const queuedAt = new Date(T0.getTime() - 1000 + submissions).toISOString();
  const { job, created } = await insertJob(
    storage,
    queuedJob({
      id: `job_drain_${submissions}`,
      tenant: TENANT,
      submissionKey: `drain-${submissions}`,
      requestHash: `hash-${submissions}`,
      queuedAt,
    }),
  );
  assert.ok(created);
  return job.id;
}

function claim(storage: Storage, hostId: string) {
  return claimNextJob(storage, { hostId, freeVcpus: 64, vcpusOfSize: { [SIZE]: 2 }, leaseSeconds: 60, now: T0 });
}
