import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  claimNextJob,
  createTenant,
  insertJob,
  reclaimExpiredLeases,
  registerHost,
  releaseUndeliveredAttempt,
  requestCancellation,
  type Storage,
  writeTenantControls,
} from "../src/index.js";
import { queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";

/**
 * releaseUndeliveredAttempt on every dialect: a claim whose answer never reached its host (a
 * long-poll claim whose connection closed before the placement was written) is undone — the job
 * queued again in its place with its attempt count as before, so the next claim (any host's) is
 * attempt 1 again — fenced on the lease, like every report on an attempt.
 */
const T0 = new Date("2026-11-22T07:00:00.000Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const TENANT = "acme";

let jobs = 0;
async function enqueue(storage: Storage): Promise<string> {
  jobs += 1;
  const id = `job_release_${jobs}`;
  await insertJob(
    storage,
    queuedJob({
      id,
      tenant: TENANT,
      submissionKey: `release-${jobs}`,
      requestHash: `hash-${jobs}`,
      queuedAt: T0.toISOString(),
    }),
  );
  return id;
}

async function claim(storage: Storage, hostId: string, now: Date) {
  const placed = await claimNextJob(storage, {
    hostId,
    freeVcpus: 8,
    vcpusOfSize: { "kiln2-cpu": 2 },
    leaseSeconds: 15,
    now,
  });
  assert.ok(placed !== undefined, `${hostId} places a job`);
  return { jobId: placed.job.id, attempt: placed.attempt.number, leaseToken: placed.attempt.lease_token };
}

async function jobRow(storage: Storage, jobId: string) {
  return storage.db.selectFrom("jobs").selectAll().where("id", "=", jobId).executeTakeFirstOrThrow();
}

async function attemptsOf(storage: Storage, jobId: string) {
  return storage.db
    .selectFrom("attempts")
    .select(["number", "host_id", "state"])
    .where("job_id", "=", jobId)
    .orderBy("number")
    .execute();
}

async function transitionsOf(storage: Storage, jobId: string) {
  const rows = await storage.db
    .selectFrom("job_transitions")
    .select(["from_status", "to_status"])
    .where("job_id", "=", jobId)
    .orderBy("position")
    .execute();
  return rows.map((r) => `${r.from_status ?? ""}→${r.to_status}`);
}

for (const dialect of DIALECTS) {
  describe(`releaseUndeliveredAttempt [${dialect.name}]`, { skip: dialect.skip }, () => {
    const withStorage = async (test: (storage: Storage) => Promise<void>) => {
      const storage = await dialect.openFresh();
      try {
        await createTenant(storage, { id: TENANT }, T0);
        for (const id of ["host-a", "host-b"]) {
          await registerHost(storage, { id, vcpus: 8, memoryBytes: 2 ** 34, isolation: "sandbox", now: T0 });
        }
        await test(storage);
      } finally {
        await storage.close();
      }
    };

    it("puts the job back as it was before the claim; another host's claim is attempt 1", async () => {
      await withStorage(async (storage) => {
        const jobId = await enqueue(storage);
        const before = await jobRow(storage, jobId);
        const undelivered = await claim(storage, "host-a", at(1));
        assert.equal(undelivered.attempt, 1);
        assert.equal(
          await releaseUndeliveredAttempt(storage, {
            ...undelivered,
            now: at(2),
            reason: "host-a left while claiming",
          }),
          "released",
        );
        const after = await jobRow(storage, jobId);
        assert.equal(after.status, "queued");
        assert.equal(after.attempts_started, 0, "the undelivered claim is not counted against max_attempts");
        assert.equal(after.started_at, null, "the job has not started");
        assert.equal(after.queued_at, before.queued_at, "it keeps its place in the queue");
        assert.deepEqual(await attemptsOf(storage, jobId), []);
        assert.deepEqual(await transitionsOf(storage, jobId), ["→queued", "queued→running", "running→queued"]);

        const next = await claim(storage, "host-b", at(3));
        assert.deepEqual([next.jobId, next.attempt], [jobId, 1]);
        assert.deepEqual(await attemptsOf(storage, jobId), [{ number: 1, host_id: "host-b", state: "running" }]);
        // The old lease fences nothing of the new attempt: releasing it again changes nothing.
        assert.equal(
          await releaseUndeliveredAttempt(storage, { ...undelivered, now: at(4), reason: "late" }),
          "stale",
          "the first lease names no attempt now",
        );
        assert.equal((await jobRow(storage, jobId)).status, "running");
      });
    });

    it("is fenced on the lease: a lost attempt, or a later one, is not released", async () => {
      await withStorage(async (storage) => {
        const jobId = await enqueue(storage);
        const first = await claim(storage, "host-a", at(1));
        // The reaper recorded it lost and queued the job again first.
        assert.deepEqual(await reclaimExpiredLeases(storage, at(60)), [{ jobId, attempt: 1 }]);
        assert.equal(await releaseUndeliveredAttempt(storage, { ...first, now: at(61), reason: "late" }), "stale");
        const second = await claim(storage, "host-b", at(62));
        assert.equal(second.attempt, 2);
        assert.equal(
          await releaseUndeliveredAttempt(storage, { ...second, leaseToken: "another", now: at(63), reason: "wrong" }),
          "stale",
        );
        assert.equal((await jobRow(storage, jobId)).attempts_started, 2);
        assert.deepEqual(
          (await attemptsOf(storage, jobId)).map((a) => [a.number, a.state]),
          [
            [1, "lost"],
            [2, "running"],
          ],
        );
      });
    });

    it("a retry's release keeps its earlier attempts and first start", async () => {
      await withStorage(async (storage) => {
        const jobId = await enqueue(storage);
        await claim(storage, "host-a", at(1));
        await reclaimExpiredLeases(storage, at(60));
        const started = (await jobRow(storage, jobId)).started_at;
        const retry = await claim(storage, "host-b", at(61));
        assert.equal(retry.attempt, 2);
        assert.equal(await releaseUndeliveredAttempt(storage, { ...retry, now: at(62), reason: "left" }), "released");
        const row = await jobRow(storage, jobId);
        assert.deepEqual([row.status, row.attempts_started, row.started_at], ["queued", 1, started]);
        assert.equal((await claim(storage, "host-a", at(63))).attempt, 2);
      });
    });

    it("a cancellation requested meanwhile settles the job cancelled, with no attempt and no usage", async () => {
      await withStorage(async (storage) => {
        const jobId = await enqueue(storage);
        const undelivered = await claim(storage, "host-a", at(1));
        assert.equal(
          (await requestCancellation(storage, { tenantId: TENANT, jobId, by: "u_canceller", now: at(2) })).kind,
          "requested",
        );
        assert.equal(
          await releaseUndeliveredAttempt(storage, { ...undelivered, now: at(3), reason: "left" }),
          "cancelled",
        );
        const row = await jobRow(storage, jobId);
        assert.deepEqual([row.status, row.attempts_started, row.usage], ["cancelled", 0, null]);
        assert.deepEqual(await attemptsOf(storage, jobId), []);
      });
    });

    it("frees the tenant's concurrency slot: its next queued job is placeable again", async () => {
      await withStorage(async (storage) => {
        await writeTenantControls(storage, {
          tenantId: TENANT,
          expectedVersion: 0,
          changes: { maxRunningJobs: 1 },
          changedBy: "test",
          now: T0,
        });
        const first = await enqueue(storage);
        await enqueue(storage);
        const undelivered = await claim(storage, "host-a", at(1));
        assert.equal(undelivered.jobId, first);
        const held = await claimNextJob(storage, {
          hostId: "host-b",
          freeVcpus: 8,
          vcpusOfSize: { "kiln2-cpu": 2 },
          leaseSeconds: 15,
          now: at(2),
        });
        assert.equal(held, undefined, "the tenant is at its limit");
        assert.equal(
          await releaseUndeliveredAttempt(storage, { ...undelivered, now: at(3), reason: "left" }),
          "released",
        );
        assert.equal((await claim(storage, "host-b", at(4))).jobId, first, "the released job, oldest, goes first");
      });
    });
  });
}
