import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { deflateRawSync } from "node:zlib";
import {
  claimNextJob,
  cleanupExpiredUploads,
  createTenant,
  insertJob,
  readUpload,
  reclaimExpiredLeases,
  recordUploadPart,
  registerHost,
  reserveUpload,
  type Storage,
} from "../src/index.js";
import { queuedJob } from "../src/testing/index.js";
import { DIALECTS } from "./dialects.js";
import { blockedOrSettled, held, withTwoStorages } from "./staged-transactions.js";

/**
 * The loops every kiln-server may run — the lease reaper (reclaimExpiredLeases) and the upload
 * sweeper (cleanupExpiredUploads) — run by two servers at once on one database: two Storages with
 * connections of their own. The race that matters is staged: one server's pass is held just
 * before it commits, the other's pass is started, and it is shown waiting for the first (a row
 * lock on PostgreSQL, the write lock on SQLite) before the first commits; afterwards the second
 * finds nothing left to do. So a lost attempt is requeued once and an expired upload's parts are
 * released once, whichever server gets there first.
 */

const T0 = new Date("2026-11-22T07:00:00.000Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const TENANT = "acme";
const LEASE = 60;
const NO_HANG = { timeout: 30 * 60_000 };
const digest = (n: number) => n.toString(16).padStart(64, "0");

async function runningJob(storage: Storage, id: string): Promise<void> {
  await insertJob(
    storage,
    queuedJob({ id, tenant: TENANT, submissionKey: `k-${id}`, requestHash: `h-${id}`, queuedAt: T0.toISOString() }),
  );
  const placed = await claimNextJob(storage, {
    hostId: "host-a",
    freeVcpus: 64,
    vcpusOfSize: { "kiln2-cpu": 2 },
    leaseSeconds: LEASE,
    now: T0,
  });
  assert.equal(placed?.job.id, id);
}

async function expiredUpload(storage: Storage, upload: string, part: number): Promise<void> {
  const reserved = await reserveUpload(storage, {
    tenantId: TENANT,
    upload,
    repository: "acme/repo",
    reservedBy: "person:p1",
    requestHash: `hash-${upload}`,
    formatVersion: 1,
    manifestDeflated: deflateRawSync(JSON.stringify({ entries: [], parts: [] })),
    manifestSha256: digest(1),
    totals: "{}",
    partCount: 1,
    partBytes: 100,
    now: T0,
    expiresAt: at(3600),
    maxBytes: 2 ** 40,
    maxUnclaimedUploads: 1000,
  });
  assert.equal(reserved.kind, "created");
  await recordUploadPart(storage, {
    tenantId: TENANT,
    upload,
    part: 1,
    sha256: digest(part),
    bytes: 100,
    origin: "uploaded",
    now: T0,
  });
}

async function setUp(storage: Storage): Promise<void> {
  await createTenant(storage, { id: TENANT }, T0);
  await registerHost(storage, { id: "host-a", vcpus: 64, memoryBytes: 2 ** 37, isolation: "sandbox", now: T0 });
}

for (const dialect of DIALECTS) {
  describe(`background loops on two servers [${dialect.name}]`, { skip: dialect.skip }, () => {
    it(
      "two lease reapers, one held before its commit: the attempt is lost once and its job requeued once",
      NO_HANG,
      async () => {
        await withTwoStorages(dialect, async (serverA, serverB) => {
          await setUp(serverA);
          await runningJob(serverA, "job_1");

          const holding = held(serverA);
          const reapA = reclaimExpiredLeases(holding.storage, at(LEASE + 1));
          await holding.ready;
          const reapB = reclaimExpiredLeases(serverB, at(LEASE + 1));
          assert.equal(await blockedOrSettled(serverB, reapB), "pending", "B waits for A's uncommitted reclaim");
          holding.release();
          const [byA, byB] = await Promise.all([reapA, reapB]);
          assert.deepEqual(byA, [{ jobId: "job_1", attempt: 1 }]);
          assert.deepEqual(byB, [], "B's conditional write found the attempt already lost");

          const job = await serverA.db
            .selectFrom("jobs")
            .selectAll()
            .where("id", "=", "job_1")
            .executeTakeFirstOrThrow();
          assert.equal(job.status, "queued");
          assert.equal(job.attempts_started, 1);
          const transitions = await serverA.db
            .selectFrom("job_transitions")
            .select("to_status")
            .where("job_id", "=", "job_1")
            .orderBy("position")
            .execute();
          assert.deepEqual(
            transitions.map((t) => t.to_status),
            ["queued", "running", "queued"],
            "requeued exactly once",
          );
          const events = await serverA.db
            .selectFrom("job_events")
            .select("status")
            .where("job_id", "=", "job_1")
            .execute();
          assert.equal(events.length, 3, "one job event per move, none twice");
          const attempts = await serverA.db.selectFrom("attempts").select(["number", "state"]).execute();
          assert.deepEqual(
            attempts.map((a) => [a.number, a.state]),
            [[1, "lost"]],
          );
        });
      },
    );

    it("two upload sweepers, one held before its commit: an expired upload is cleaned once", NO_HANG, async () => {
      await withTwoStorages(dialect, async (serverA, serverB) => {
        await setUp(serverA);
        await expiredUpload(serverA, "up-1", 7);

        const holding = held(serverA);
        const sweepA = cleanupExpiredUploads(holding.storage, at(3601));
        await holding.ready;
        const sweepB = cleanupExpiredUploads(serverB, at(3602));
        assert.equal(await blockedOrSettled(serverB, sweepB), "pending", "B waits for A's uncommitted cleanup");
        holding.release();
        assert.deepEqual(await Promise.all([sweepA, sweepB]), [1, 0], "B's conditional write found it cleaned");

        const read = await readUpload(serverA, { tenantId: TENANT, upload: "up-1" });
        assert.equal(read?.upload.cleaned_at, at(3601).toISOString(), "A's cleanup, not overwritten by B's");
        assert.deepEqual(read?.parts, []);
      });
    });

    it(
      "two servers sweeping and reaping at once over many rows: each upload cleaned once, each attempt lost once",
      NO_HANG,
      async () => {
        await withTwoStorages(dialect, async (serverA, serverB) => {
          await setUp(serverA);
          const uploads = Array.from({ length: 12 }, (_, i) => `up-${String(i).padStart(2, "0")}`);
          for (const [i, upload] of uploads.entries()) await expiredUpload(serverA, upload, 100 + i);
          const jobs = Array.from({ length: 6 }, (_, i) => `job_${i}`);
          for (const id of jobs) await runningJob(serverA, id);

          const [sweptA, sweptB, reapedA, reapedB] = await Promise.all([
            cleanupExpiredUploads(serverA, at(3601)),
            cleanupExpiredUploads(serverB, at(3601)),
            reclaimExpiredLeases(serverA, at(LEASE + 1)),
            reclaimExpiredLeases(serverB, at(LEASE + 1)),
          ]);
          assert.equal(sweptA + sweptB, uploads.length, "every expired upload cleaned by exactly one server");
          assert.deepEqual(
            [...reapedA, ...reapedB].map((r) => r.jobId).sort(),
            jobs,
            "every lost attempt reclaimed by exactly one server",
          );
          const requeues = await serverA.db
            .selectFrom("job_transitions")
            .select("job_id")
            .where("from_status", "=", "running")
            .where("to_status", "=", "queued")
            .execute();
          assert.equal(requeues.length, jobs.length);
          const parts = await serverA.db.selectFrom("source_upload_parts").select("upload").execute();
          assert.deepEqual(parts, []);
        });
      },
    );
  });
}
