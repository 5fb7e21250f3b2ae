import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type AttemptCompletion,
  type AttemptRow,
  claimNextJob,
  createTenant,
  finishAttempt,
  insertJob,
  type JobRow,
  type MeteredAttempt,
  reclaimExpiredLeases,
  registerHost,
  renewAttemptLease,
  requestCancellation,
  type Storage,
} from "../src/index.js";
import { attemptCompletion, queuedJob } from "../src/testing/index.js";
import { DIALECTS, type TestDatabase } from "./dialects.js";
import { blockedOrSettled, held } from "./staged-transactions.js";

/**
 * The job queue's verbs (claimNextJob, finishAttempt, renewAttemptLease, reclaimExpiredLeases,
 * requestCancellation) on every dialect, with several Storages over one database: on SQLite,
 * separate connections to one file; on PostgreSQL, separate pools, so SKIP LOCKED and row locks
 * are really contended. Every instant is explicit (the verbs take `now`); no verdict depends on
 * how long anything took.
 *
 * Races that matter are staged, not hoped for: one side's transaction is held open just before
 * its commit (`held`), the other side is started, and on PostgreSQL the test waits until the
 * server shows it waiting on a row lock (or it finished without waiting) before letting the
 * first commit. On SQLite the second side waits for the single writer at BEGIN IMMEDIATE.
 */

const T0 = new Date("2026-11-22T07:00:00.000Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const iso = (seconds: number) => at(seconds).toISOString();
const clock = { now: () => T0 };
const TENANT = "acme";
const SIZE = "kiln2-cpu";
const VCPUS_OF_SIZE = { [SIZE]: 2, "kiln16-cpu": 16 };
const GiB = 2 ** 30;
const DISK_OF_SIZE = { [SIZE]: 16 * GiB, "kiln16-cpu": 128 * GiB };
const LEASE = 60;
const STORAGES = 8;
/** A safety net so a lock the test did not expect hangs no run; never the verdict. */
const NO_HANG = { timeout: 30 * 60_000 };

interface Lease {
  readonly jobId: string;
  readonly attempt: number;
  readonly leaseToken: string;
}

for (const dialect of DIALECTS) {
  describe(`job queue [${dialect.name}]`, { skip: dialect.skip }, () => {
    /**
     * A fresh database with the tenant and `count` Storages over it (STORAGES where a test races
     * them all); `main` is the first. A test opens only the Storages it uses: each is a pool and a
     * migration check that an unused one would spend for nothing.
     */
    async function withQueue(count: number, test: (main: Storage, storages: Storage[]) => Promise<void>) {
      const database: TestDatabase = await dialect.createDatabase();
      const storages: Storage[] = [];
      try {
        for (let i = 0; i < count; i++) storages.push(await database.open({ maxConnections: 2 }));
        const [main] = storages;
        assert.ok(main);
        await createTenant(main, { id: TENANT }, clock.now());
        await createTenant(main, { id: "globex" }, clock.now());
        for (const host of ["host-a", "host-b"]) {
          await registerHost(main, { id: host, vcpus: 64, memoryBytes: 2 ** 37, isolation: "sandbox", now: T0 });
        }
        await test(main, storages);
      } finally {
        await Promise.all(storages.map((storage) => storage.close()));
        await database.dispose();
      }
    }

    describe("claim", () => {
      it("places the oldest queued job that fits as attempt 1, leased until now + leaseSeconds", async () => {
        await withQueue(1, async (storage) => {
          const big = await enqueue(storage, "job_big", { queuedAt: at(-30), size: "kiln16-cpu" });
          const older = await enqueue(storage, "job_older", { queuedAt: at(-20) });
          const newer = await enqueue(storage, "job_newer", { queuedAt: at(-10) });

          const placed = await claim(storage, "host-a", at(0), { freeVcpus: 8 });
          assert.equal(
            placed?.job.id,
            older,
            "the 16-vCPU job does not fit 8 free vCPUs; the oldest 2-vCPU one is placed",
          );
          assert.equal(placed.job.status, "running");
          assert.equal(placed.attempt.number, 1);
          assert.equal(placed.attempt.host_id, "host-a");
          assert.equal(placed.attempt.vcpus, 2);
          assert.equal(placed.attempt.state, "running");
          assert.equal(placed.attempt.lease_expires_at, iso(LEASE));

          const { job, attempts, transitions } = await snapshot(storage, older);
          assert.equal(job.status, "running");
          assert.equal(job.attempts_started, 1);
          assert.equal(job.started_at, iso(0));
          assert.deepEqual(
            attempts.map((a) => [a.number, a.lease_token, a.state]),
            [[1, placed.attempt.lease_token, "running"]],
          );
          assert.deepEqual(
            transitions.map((t) => [t.from_status, t.to_status]),
            [
              [null, "queued"],
              ["queued", "running"],
            ],
          );
          assert.equal((await snapshot(storage, big)).job.status, "queued");
          assert.equal((await snapshot(storage, newer)).job.status, "queued");
        });
      });

      it("places only sizes whose disk quota the host's free disk covers", async () => {
        await withQueue(1, async (storage) => {
          const big = await enqueue(storage, "job_big", { queuedAt: at(-30), size: "kiln16-cpu" });
          const small = await enqueue(storage, "job_small", { queuedAt: at(-20) });
          assert.equal(
            await claim(storage, "host-a", at(0), { freeDiskBytes: 16 * GiB - 1 }),
            undefined,
            "no size's quota fits: nothing is placed, whatever the free vCPUs",
          );
          const placed = await claim(storage, "host-a", at(0), { freeDiskBytes: 100 * GiB });
          assert.equal(placed?.job.id, small, "the older 128 GiB job does not fit 100 GiB; the 16 GiB one does");
          assert.equal((await snapshot(storage, big)).job.status, "queued");
          assert.equal((await claim(storage, "host-a", at(0), { freeDiskBytes: 128 * GiB }))?.job.id, big);
        });
      });

      it(
        `${STORAGES} concurrent claimers on separate connections, 3 queued jobs: each job placed exactly once`,
        NO_HANG,
        async () => {
          await withQueue(STORAGES, async (main, storages) => {
            const ids = [];
            for (let i = 0; i < 3; i++) ids.push(await enqueue(main, `job_${i}`, { queuedAt: at(-10 + i) }));

            const results = await Promise.all(
              storages.map((s, i) => claim(s, i % 2 === 0 ? "host-a" : "host-b", at(0))),
            );
            const placed = results.filter((r) => r !== undefined);
            assert.equal(placed.length, 3, "as many claimers as jobs got one; the others got nothing");
            assert.deepEqual(placed.map((p) => p.job.id).sort(), ids);
            assert.equal(new Set(placed.map((p) => p.attempt.lease_token)).size, 3);

            const attempts = await main.db.selectFrom("attempts").selectAll().orderBy("job_id").execute();
            assert.deepEqual(
              attempts.map((a) => [a.job_id, a.number, a.state]),
              ids.map((id) => [id, 1, "running"]),
              "exactly one lease per job",
            );
            for (const p of placed) {
              const { job } = await snapshot(main, p.job.id);
              assert.equal(job.status, "running");
              assert.equal(job.attempts_started, 1);
              assert.equal(attempts.find((a) => a.job_id === p.job.id)?.lease_token, p.attempt.lease_token);
            }
          });
        },
      );

      it(`${STORAGES} concurrent claimers draining 24 jobs: every job placed once, none twice`, NO_HANG, async () => {
        await withQueue(STORAGES, async (main, storages) => {
          const ids: string[] = [];
          for (let i = 0; i < 24; i++) {
            ids.push(await enqueue(main, `job_${String(i).padStart(2, "0")}`, { queuedAt: at(-100 + i) }));
          }
          const perClaimer = await Promise.all(
            storages.map(async (s) => {
              const mine: string[] = [];
              for (;;) {
                const placed = await claim(s, "host-a", at(0));
                if (placed === undefined) return mine;
                mine.push(placed.job.id);
              }
            }),
          );
          const all = perClaimer.flat();
          assert.deepEqual([...all].sort(), ids, "each job claimed by exactly one claimer");
          const rows = await main.db
            .selectFrom("attempts")
            .select(["job_id", "number"])
            .orderBy("job_id")
            .orderBy("number")
            .execute();
          assert.deepEqual(
            rows.map((r) => [r.job_id, r.number]),
            ids.map((id) => [id, 1]),
          );
          const queued = await main.db.selectFrom("jobs").select("id").where("status", "=", "queued").execute();
          assert.deepEqual(queued, []);
        });
      });

      it(
        "a claim never waits on a job another claim holds: PostgreSQL skips it, SQLite waits for the single writer",
        NO_HANG,
        async () => {
          await withQueue(2, async (main, [a, b]) => {
            assert.ok(a && b);
            const first = await enqueue(main, "job_first", { queuedAt: at(-20) });
            const second = await enqueue(main, "job_second", { queuedAt: at(-10) });

            // A's claim has locked and moved the oldest job, and holds its transaction open.
            const holding = held(a);
            const claimA = claim(holding.storage, "host-a", at(0));
            await holding.ready;
            const claimB = claim(b, "host-b", at(0));
            const beforeRelease = await blockedOrSettled(main, claimB);
            holding.release();
            if (main.capabilities.skipLocked) {
              assert.equal(beforeRelease, "settled", "B skipped the locked row instead of waiting for A");
            } else {
              assert.equal(beforeRelease, "pending", "B waits for A's write lock");
            }
            const [placedA, placedB] = await Promise.all([claimA, claimB]);
            assert.equal(placedA?.job.id, first);
            assert.equal(placedB?.job.id, second);
            assert.equal((await snapshot(main, first)).attempts.length, 1);
            assert.equal((await snapshot(main, second)).attempts.length, 1);
          });
        },
      );
    });

    describe("finish fencing", () => {
      it("a wrong lease token or attempt number is stale and changes nothing; the holder's finish settles once", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1");
          const lease = leaseOf(await claim(storage, "host-a", at(0)));
          const before = await snapshot(storage, jobId);

          assert.equal(await finish(storage, { ...lease, leaseToken: "not-the-token" }, at(10), "failed"), "stale");
          assert.equal(await finish(storage, { ...lease, attempt: 2 }, at(10), "failed"), "stale");
          assert.deepEqual(await snapshot(storage, jobId), before, "a stale finish changes nothing");

          assert.equal(await finish(storage, lease, at(30), "passed"), "finished");
          const after = await snapshot(storage, jobId);
          assert.equal(after.job.status, "passed");
          assert.equal(after.job.finished_at, iso(30));
          assert.deepEqual(JSON.parse(after.job.settlement ?? "null"), {
            settled_at: iso(30),
            status: "passed",
            attempts: 1,
            usage_recorded: true,
          });
          assert.deepEqual(
            after.attempts.map((a) => [a.number, a.state, a.outcome, a.finished_at]),
            [[1, "finished", "passed", iso(30)]],
          );

          assert.equal(await finish(storage, lease, at(40), "failed"), "stale", "an attempt finishes exactly once");
          assert.deepEqual(await snapshot(storage, jobId), after);
        });
      });

      it("after the lease was reclaimed and the job placed again, the old holder's finish is stale; the new holder's wins", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1");
          const old = leaseOf(await claim(storage, "host-a", at(0)));
          assert.deepEqual(await reclaimExpiredLeases(storage, at(LEASE + 1)), [{ jobId, attempt: 1 }]);
          const current = leaseOf(await claim(storage, "host-b", at(LEASE + 2)));
          assert.equal(current.attempt, 2);
          const before = await snapshot(storage, jobId);

          assert.equal(await finish(storage, old, at(LEASE + 3), "passed"), "stale");
          assert.equal(
            await finish(storage, { ...current, leaseToken: old.leaseToken }, at(LEASE + 3), "passed"),
            "stale",
            "the old token does not finish the new attempt",
          );
          assert.deepEqual(await snapshot(storage, jobId), before);

          assert.equal(await finish(storage, current, at(LEASE + 30), "failed"), "finished");
          const { job, attempts } = await snapshot(storage, jobId);
          assert.equal(job.status, "failed");
          assert.equal(JSON.parse(job.settlement ?? "null").attempts, 2);
          assert.deepEqual(
            attempts.map((a) => [a.number, a.host_id, a.state, a.outcome]),
            [
              [1, "host-a", "lost", "lost"],
              [2, "host-b", "finished", "failed"],
            ],
          );
        });
      });

      it("two concurrent finishes of one attempt on separate connections: exactly one finishes", NO_HANG, async () => {
        await withQueue(STORAGES, async (main, storages) => {
          const jobId = await enqueue(main, "job_1");
          const lease = leaseOf(await claim(main, "host-a", at(0)));
          const results = await Promise.all(
            storages.map((s, i) => finish(s, lease, at(10 + i), i % 2 === 0 ? "passed" : "failed")),
          );
          assert.deepEqual(
            results.filter((r) => r === "finished"),
            ["finished"],
          );
          const { job, attempts, transitions } = await snapshot(main, jobId);
          const winner = results.indexOf("finished");
          assert.equal(job.status, winner % 2 === 0 ? "passed" : "failed");
          assert.equal(job.finished_at, iso(10 + winner));
          assert.equal(attempts[0]?.outcome, job.status);
          assert.deepEqual(
            transitions.map((t) => t.to_status),
            ["queued", "running", job.status],
            "one terminal transition",
          );
        });
      });

      it(
        "a finish and a reclaim of the same expired attempt, concurrently: exactly one takes it",
        NO_HANG,
        async () => {
          await withQueue(2, async (main, [a, b]) => {
            assert.ok(a && b);
            const jobId = await enqueue(main, "job_1");
            const lease = leaseOf(await claim(main, "host-a", at(0)));
            const [finished, reclaimed] = await Promise.all([
              finish(a, lease, at(LEASE + 5), "passed"),
              reclaimExpiredLeases(b, at(LEASE + 5)),
            ]);
            const { job, attempts } = await snapshot(main, jobId);
            if (finished === "finished") {
              assert.deepEqual(reclaimed, []);
              assert.equal(job.status, "passed");
              assert.equal(attempts[0]?.state, "finished");
            } else {
              assert.deepEqual(reclaimed, [{ jobId, attempt: 1 }]);
              assert.equal(job.status, "queued");
              assert.equal(attempts[0]?.state, "lost");
            }
          });
        },
      );
    });

    describe("lease renewal and reclaim", () => {
      it("renewal extends the lease from now; reclaim takes the attempt only once the renewed lease has expired", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1");
          const lease = leaseOf(await claim(storage, "host-a", at(0)));

          assert.deepEqual(await renew(storage, lease, at(50)), { kind: "renewed", cancelRequested: false });
          assert.equal((await snapshot(storage, jobId)).attempts[0]?.lease_expires_at, iso(50 + LEASE));

          assert.deepEqual(await reclaimExpiredLeases(storage, at(LEASE + 1)), [], "the original expiry has passed");
          assert.deepEqual(
            await reclaimExpiredLeases(storage, at(50 + LEASE)),
            [],
            "expired means strictly before now",
          );
          const stillRunning = await snapshot(storage, jobId);
          assert.equal(stillRunning.job.status, "running");
          assert.equal(stillRunning.attempts[0]?.state, "running");

          assert.deepEqual(await reclaimExpiredLeases(storage, at(51 + LEASE)), [{ jobId, attempt: 1 }]);
          const { job, attempts, transitions } = await snapshot(storage, jobId);
          assert.equal(job.status, "queued");
          assert.equal(job.queued_at, iso(51 + LEASE));
          assert.match(job.queue_annotation ?? "", /attempt 1 lost with host host-a/);
          assert.equal(job.settlement, null);
          assert.deepEqual(
            attempts.map((a) => [a.state, a.outcome, a.finished_at]),
            [["lost", "lost", iso(51 + LEASE)]],
          );
          assert.deepEqual(
            transitions.map((t) => t.to_status),
            ["queued", "running", "queued"],
          );
          assert.deepEqual(await reclaimExpiredLeases(storage, at(1000)), [], "a lost attempt is reclaimed once");
        });
      });

      it("after reclaim the old holder's renewal and finish are stale, and the job is placed again as attempt 2", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1");
          const old = leaseOf(await claim(storage, "host-a", at(0)));
          await reclaimExpiredLeases(storage, at(LEASE + 1));
          const afterReclaim = await snapshot(storage, jobId);

          assert.deepEqual(await renew(storage, old, at(LEASE + 2)), { kind: "stale" });
          assert.equal(await finish(storage, old, at(LEASE + 2), "passed"), "stale");
          assert.deepEqual(await snapshot(storage, jobId), afterReclaim, "stale calls change nothing");

          const again = await claim(storage, "host-b", at(LEASE + 3));
          assert.equal(again?.job.id, jobId);
          assert.equal(again.attempt.number, 2);
          assert.notEqual(again.attempt.lease_token, old.leaseToken);
          assert.deepEqual(
            await renew(storage, { ...old, attempt: 2 }, at(LEASE + 4)),
            { kind: "stale" },
            "the old token does not renew attempt 2",
          );
          assert.deepEqual(await renew(storage, leaseOf(again), at(LEASE + 4)), {
            kind: "renewed",
            cancelRequested: false,
          });
        });
      });

      it("a heartbeat after the expiry but before any reclaim still renews, and nothing is then lost", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1");
          const lease = leaseOf(await claim(storage, "host-a", at(0)));
          assert.deepEqual(await renew(storage, lease, at(LEASE + 30)), { kind: "renewed", cancelRequested: false });
          assert.deepEqual(await reclaimExpiredLeases(storage, at(LEASE + 31)), []);
          assert.equal((await snapshot(storage, jobId)).attempts[0]?.state, "running");
        });
      });

      it("a job whose last allowed attempt is lost fails with cause infrastructure and is never placed again", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1", { maxAttempts: 2 });
          leaseOf(await claim(storage, "host-a", at(0)));
          assert.deepEqual(await reclaimExpiredLeases(storage, at(100)), [{ jobId, attempt: 1 }]);
          assert.equal((await snapshot(storage, jobId)).job.status, "queued");
          assert.equal(leaseOf(await claim(storage, "host-b", at(200))).attempt, 2);
          assert.deepEqual(await reclaimExpiredLeases(storage, at(300)), [{ jobId, attempt: 2 }]);

          const { job, attempts } = await snapshot(storage, jobId);
          assert.equal(job.status, "failed");
          assert.equal(job.finished_at, iso(300));
          assert.equal(JSON.parse(job.failure ?? "null").cause, "infrastructure");
          assert.deepEqual(JSON.parse(job.settlement ?? "null"), {
            settled_at: iso(300),
            status: "failed",
            attempts: 2,
            usage_recorded: false,
          });
          assert.deepEqual(
            attempts.map((a) => a.state),
            ["lost", "lost"],
          );
          assert.equal(await claim(storage, "host-a", at(400)), undefined);
        });
      });

      it(`${STORAGES} concurrent reapers reclaim each expired attempt exactly once`, NO_HANG, async () => {
        await withQueue(STORAGES, async (main, storages) => {
          const ids = [];
          for (let i = 0; i < 3; i++) {
            ids.push(await enqueue(main, `job_${i}`, { queuedAt: at(-10 + i) }));
            await claim(main, "host-a", at(0));
          }
          const results = await Promise.all(storages.map((s) => reclaimExpiredLeases(s, at(LEASE + 1))));
          assert.deepEqual(
            results
              .flat()
              .map((r) => [r.jobId, r.attempt])
              .sort(),
            ids.map((id) => [id, 1]),
          );
          for (const id of ids) {
            const { job, transitions } = await snapshot(main, id);
            assert.equal(job.status, "queued");
            assert.deepEqual(
              transitions.map((t) => t.to_status),
              ["queued", "running", "queued"],
            );
          }
        });
      });

      it(
        "a renewal racing a reclaim on separate connections: renewed (nothing lost) or lost (renewal stale), never both",
        NO_HANG,
        async () => {
          await withQueue(2, async (main, [a, b]) => {
            assert.ok(a && b);
            const jobId = await enqueue(main, "job_1");
            const lease = leaseOf(await claim(main, "host-a", at(0)));
            const [renewal, reclaimed] = await Promise.all([
              renew(a, lease, at(LEASE + 5)),
              reclaimExpiredLeases(b, at(LEASE + 5)),
            ]);
            const { job, attempts } = await snapshot(main, jobId);
            if (renewal.kind === "renewed") {
              assert.deepEqual(reclaimed, []);
              assert.equal(attempts[0]?.state, "running");
              assert.equal(attempts[0]?.lease_expires_at, iso(LEASE + 5 + LEASE));
              assert.equal(job.status, "running");
            } else {
              assert.deepEqual(reclaimed, [{ jobId, attempt: 1 }]);
              assert.equal(attempts[0]?.state, "lost");
              assert.equal(job.status, "queued");
            }
          });
        },
      );
    });

    describe("cancellation", () => {
      it("a queued job is cancelled at once, settles with no attempt, and is never placed", async () => {
        await withQueue(1, async (storage) => {
          const cancelled = await enqueue(storage, "job_older", { queuedAt: at(-20) });
          const other = await enqueue(storage, "job_newer", { queuedAt: at(-10) });

          assert.deepEqual(await cancel(storage, cancelled, at(0)), { kind: "requested", status: "cancelled" });
          const { job, attempts } = await snapshot(storage, cancelled);
          assert.equal(job.status, "cancelled");
          assert.equal(job.cancel_requested_at, iso(0));
          assert.equal(job.cancel_requested_by, "u_canceller");
          assert.equal(job.finished_at, iso(0));
          assert.equal(JSON.parse(job.failure ?? "null").cause, "cancelled");
          assert.deepEqual(JSON.parse(job.settlement ?? "null"), {
            settled_at: iso(0),
            status: "cancelled",
            attempts: 0,
            usage_recorded: false,
          });
          assert.deepEqual(attempts, []);

          assert.equal(
            (await claim(storage, "host-a", at(1)))?.job.id,
            other,
            "the older, cancelled job is passed over",
          );
          assert.equal(await claim(storage, "host-a", at(2)), undefined);
          assert.deepEqual((await snapshot(storage, cancelled)).attempts, []);
          assert.deepEqual(await cancel(storage, cancelled, at(3)), { kind: "terminal", status: "cancelled" });
        });
      });

      it("a running job moves to cancellation_requested; the holder's renewal learns it; its finish settles the job cancelled", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1");
          const lease = leaseOf(await claim(storage, "host-a", at(0)));

          assert.deepEqual(await cancel(storage, jobId, at(20)), {
            kind: "requested",
            status: "cancellation_requested",
          });
          assert.deepEqual(
            await cancel(storage, jobId, at(21)),
            { kind: "requested", status: "cancellation_requested" },
            "a repeated request answers the same",
          );
          const requested = await snapshot(storage, jobId);
          assert.equal(requested.job.status, "cancellation_requested");
          assert.equal(requested.job.cancel_requested_at, iso(20), "the first request's instant is kept");
          assert.equal(requested.attempts[0]?.state, "running", "the attempt runs until its host reaps it");

          assert.deepEqual(await renew(storage, lease, at(30)), { kind: "renewed", cancelRequested: true });
          assert.deepEqual(await renew(storage, { ...lease, leaseToken: "not-the-token" }, at(30)), { kind: "stale" });

          // The host reaps the build; even were it to report it passed, the job ends cancelled.
          const metered: MeteredAttempt[] = [];
          assert.equal(await finish(storage, lease, at(35), "passed", metered), "finished");
          assert.deepEqual(
            metered,
            [{ startedAt: iso(0), vcpus: 2, size: SIZE, cancelRequestedAt: iso(20) }],
            "metering is handed the cancellation instant",
          );
          const { job, transitions } = await snapshot(storage, jobId);
          assert.equal(job.status, "cancelled");
          assert.equal(JSON.parse(job.settlement ?? "null").status, "cancelled");
          assert.equal(JSON.parse(job.usage ?? "null").seconds, 20, "usage closes at the cancellation");
          assert.deepEqual(
            transitions.map((t) => [t.from_status, t.to_status]),
            [
              [null, "queued"],
              ["queued", "running"],
              ["running", "cancellation_requested"],
              ["cancellation_requested", "cancelled"],
            ],
          );
          assert.deepEqual(await cancel(storage, jobId, at(40)), { kind: "terminal", status: "cancelled" });
          assert.deepEqual(await renew(storage, lease, at(40)), { kind: "stale" });
        });
      });

      it("a job with cancellation requested whose host stops renewing is reclaimed as cancelled, not requeued", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1");
          leaseOf(await claim(storage, "host-a", at(0)));
          await cancel(storage, jobId, at(10));
          assert.deepEqual(await reclaimExpiredLeases(storage, at(LEASE + 1)), [{ jobId, attempt: 1 }]);
          const { job } = await snapshot(storage, jobId);
          assert.equal(job.status, "cancelled");
          assert.equal(JSON.parse(job.failure ?? "null").cause, "cancelled");
          assert.equal(JSON.parse(job.settlement ?? "null").status, "cancelled");
          assert.equal(await claim(storage, "host-b", at(LEASE + 2)), undefined);
        });
      });

      it("another tenant's job is not found and left alone; a finished job is terminal", async () => {
        await withQueue(1, async (storage) => {
          const jobId = await enqueue(storage, "job_1");
          const before = await snapshot(storage, jobId);
          assert.deepEqual(
            await requestCancellation(storage, { tenantId: "globex", jobId, by: "u_globex", now: at(0) }),
            { kind: "not_found" },
          );
          assert.deepEqual(await snapshot(storage, jobId), before);
          const lease = leaseOf(await claim(storage, "host-a", at(1)));
          assert.equal(await finish(storage, lease, at(2), "failed"), "finished");
          assert.deepEqual(await cancel(storage, jobId, at(3)), { kind: "terminal", status: "failed" });
          assert.equal((await snapshot(storage, jobId)).job.cancel_requested_at, null);
        });
      });

      it(
        "a cancellation arriving while a claim holds the queued job: the job runs with cancellation requested",
        NO_HANG,
        async () => {
          await withQueue(2, async (main, [a, b]) => {
            assert.ok(a && b);
            const jobId = await enqueue(main, "job_1");
            const holding = held(a);
            const claiming = claim(holding.storage, "host-a", at(0));
            await holding.ready; // placed, not yet committed
            const cancelling = cancel(b, jobId, at(1));
            const beforeRelease = await blockedOrSettled(main, cancelling);
            holding.release();
            assert.equal(beforeRelease, "pending", "the cancellation waits for the claim");
            const lease = leaseOf(await claiming);
            assert.deepEqual(await cancelling, { kind: "requested", status: "cancellation_requested" });
            assert.equal((await snapshot(main, jobId)).job.status, "cancellation_requested");
            assert.deepEqual(await renew(main, lease, at(2)), { kind: "renewed", cancelRequested: true });
          });
        },
      );

      it(
        "a cancellation committed while a reaper reclaims the attempt: the job ends cancelled, not requeued",
        NO_HANG,
        async () => {
          await withQueue(2, async (main, [a, b]) => {
            assert.ok(a && b);
            const jobId = await enqueue(main, "job_1");
            leaseOf(await claim(main, "host-a", at(0)));
            const holding = held(a);
            const cancelling = holding.storage.transaction((trx) =>
              requestCancellation(trx, { tenantId: TENANT, jobId, by: "u_canceller", now: at(LEASE + 1) }),
            );
            await holding.ready; // cancellation written, not yet committed
            const reclaiming = reclaimExpiredLeases(b, at(LEASE + 2));
            const beforeRelease = await blockedOrSettled(main, reclaiming);
            holding.release();
            assert.equal(beforeRelease, "pending", "the reaper waits for the cancellation");
            assert.deepEqual(await cancelling, { kind: "requested", status: "cancellation_requested" });
            assert.deepEqual(await reclaiming, [{ jobId, attempt: 1 }]);
            const { job, transitions } = await snapshot(main, jobId);
            assert.equal(job.status, "cancelled", "a requested cancellation is not lost to the requeue");
            assert.deepEqual(
              transitions.map((t) => [t.from_status, t.to_status]),
              [
                [null, "queued"],
                ["queued", "running"],
                ["running", "cancellation_requested"],
                ["cancellation_requested", "cancelled"],
              ],
            );
            assert.equal(await claim(main, "host-b", at(LEASE + 3)), undefined);
          });
        },
      );

      it(
        "a cancellation arriving while a reaper requeues the running job: the requeued job is cancelled",
        NO_HANG,
        async () => {
          await withQueue(2, async (main, [a, b]) => {
            assert.ok(a && b);
            const jobId = await enqueue(main, "job_1");
            leaseOf(await claim(main, "host-a", at(0)));
            const holding = held(a);
            const reclaiming = reclaimExpiredLeases(holding.storage, at(LEASE + 1));
            await holding.ready; // attempt lost and job requeued, not yet committed
            const cancelling = cancel(b, jobId, at(LEASE + 2));
            const beforeRelease = await blockedOrSettled(main, cancelling);
            holding.release();
            assert.equal(beforeRelease, "pending", "the cancellation waits for the reaper");
            assert.deepEqual(await reclaiming, [{ jobId, attempt: 1 }]);
            assert.deepEqual(await cancelling, { kind: "requested", status: "cancelled" });
            const { job, attempts } = await snapshot(main, jobId);
            assert.equal(job.status, "cancelled");
            assert.deepEqual(
              attempts.map((t) => t.state),
              ["lost"],
            );
            assert.equal(await claim(main, "host-b", at(LEASE + 3)), undefined);
          });
        },
      );

      it("a cancellation committed while the holder finishes: the job settles cancelled", NO_HANG, async () => {
        await withQueue(2, async (main, [a, b]) => {
          assert.ok(a && b);
          const jobId = await enqueue(main, "job_1");
          const lease = leaseOf(await claim(main, "host-a", at(0)));
          const holding = held(a);
          const cancelling = holding.storage.transaction((trx) =>
            requestCancellation(trx, { tenantId: TENANT, jobId, by: "u_canceller", now: at(20) }),
          );
          await holding.ready;
          const metered: MeteredAttempt[] = [];
          const finishing = finish(b, lease, at(30), "passed", metered);
          const beforeRelease = await blockedOrSettled(main, finishing);
          holding.release();
          assert.equal(beforeRelease, "pending", "the finish waits for the cancellation");
          assert.deepEqual(await cancelling, { kind: "requested", status: "cancellation_requested" });
          assert.equal(await finishing, "finished");
          const { job, transitions } = await snapshot(main, jobId);
          assert.equal(job.status, "cancelled");
          assert.equal(metered[0]?.cancelRequestedAt, iso(20));
          assert.deepEqual(
            transitions.map((t) => [t.from_status, t.to_status]),
            [
              [null, "queued"],
              ["queued", "running"],
              ["running", "cancellation_requested"],
              ["cancellation_requested", "cancelled"],
            ],
          );
        });
      });

      it(
        "a cancellation racing a claim of the queued job on separate connections: never both placed and cancelled",
        NO_HANG,
        async () => {
          await withQueue(2, async (main, [a, b]) => {
            assert.ok(a && b);
            const jobId = await enqueue(main, "job_1");
            const [placed, cancelled] = await Promise.all([claim(a, "host-a", at(0)), cancel(b, jobId, at(0))]);
            const { job, attempts } = await snapshot(main, jobId);
            if (placed === undefined) {
              assert.deepEqual(cancelled, { kind: "requested", status: "cancelled" });
              assert.equal(job.status, "cancelled");
              assert.deepEqual(attempts, []);
            } else {
              assert.deepEqual(cancelled, { kind: "requested", status: "cancellation_requested" });
              assert.equal(job.status, "cancellation_requested");
              assert.equal(attempts.length, 1);
            }
          });
        },
      );
    });
  });
}

let submissions = 0;

/** A queued job of TENANT, stored as jobs.submit stores one (through insertJob). */
async function enqueue(
  storage: Storage,
  id: string,
  options: { queuedAt?: Date; maxAttempts?: number; size?: string } = {},
): Promise<string> {
  submissions += 1;
  const queuedAt = (options.queuedAt ?? at(-1)).toISOString();
  const { job, created } = await insertJob(
    storage,
    queuedJob(
      { id, tenant: TENANT, submissionKey: `queue-${submissions}`, requestHash: `hash-${submissions}`, queuedAt },
      { size: options.size ?? SIZE, max_attempts: options.maxAttempts ?? 3 },
    ),
  );
  assert.ok(created);
  return job.id;
}

function claim(
  storage: Storage,
  hostId: string,
  now: Date,
  options: { freeVcpus?: number; freeDiskBytes?: number } = {},
): Promise<{ job: JobRow; attempt: AttemptRow } | undefined> {
  return claimNextJob(storage, {
    hostId,
    freeVcpus: options.freeVcpus ?? 64,
    vcpusOfSize: VCPUS_OF_SIZE,
    ...(options.freeDiskBytes === undefined
      ? {}
      : { freeDiskBytes: options.freeDiskBytes, diskBytesOfSize: DISK_OF_SIZE }),
    leaseSeconds: LEASE,
    now,
  });
}

function leaseOf(placed: { job: JobRow; attempt: AttemptRow } | undefined): Lease {
  assert.ok(placed, "a job was placed");
  return { jobId: placed.job.id, attempt: placed.attempt.number, leaseToken: placed.attempt.lease_token };
}

function renew(storage: Storage, lease: Lease, now: Date) {
  return renewAttemptLease(storage, { ...lease, leaseSeconds: LEASE, now });
}

function cancel(storage: Storage, jobId: string, now: Date) {
  return requestCancellation(storage, { tenantId: TENANT, jobId, by: "u_canceller", now });
}

/**
 * Finishes the attempt as its host reports `outcome`. Metering follows the control plane's rule
 * (from the attempt's start to its end, or to the cancellation when one was requested); what it
 * was handed is pushed onto `metered`.
 */
function finish(
  storage: Storage,
  lease: Lease,
  now: Date,
  outcome: AttemptCompletion["outcome"],
  metered: MeteredAttempt[] = [],
): Promise<"finished" | "stale"> {
  return finishAttempt(storage, {
    ...lease,
    now,
    result: attemptCompletion(outcome),
    meter: (attempt) => {
      metered.push(attempt);
      const end = attempt.cancelRequestedAt ?? now.toISOString();
      const seconds = (Date.parse(end) - Date.parse(attempt.startedAt)) / 1000;
      return { size: attempt.size, seconds, vcpuSeconds: seconds * attempt.vcpus };
    },
  });
}

/** The job's row, attempts, transitions and tenant events, for before/after comparisons. */
async function snapshot(storage: Storage, jobId: string) {
  const job = await storage.db.selectFrom("jobs").selectAll().where("id", "=", jobId).executeTakeFirstOrThrow();
  const attempts = await storage.db
    .selectFrom("attempts")
    .selectAll()
    .where("job_id", "=", jobId)
    .orderBy("number")
    .execute();
  const transitions = await storage.db
    .selectFrom("job_transitions")
    .selectAll()
    .where("job_id", "=", jobId)
    .orderBy("position")
    .execute();
  const events = await storage.db
    .selectFrom("job_events")
    .select(["status", "previous_status", "at"])
    .where("job_id", "=", jobId)
    .orderBy("sequence")
    .execute();
  return { job, attempts, transitions, events };
}
