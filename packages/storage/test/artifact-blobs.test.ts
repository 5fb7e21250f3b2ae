import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ManualClock } from "@kiln/contract/testing";
import {
  type BlobReadStream,
  type BlobStore,
  claimNextJob,
  clearBlobForPut,
  confirmBlobPut,
  createTenant,
  finishAttempt,
  ARTIFACT_BLOB_GRACE_SECONDS as GRACE,
  insertJob,
  ARTIFACT_BLOB_MARK_LEASE_SECONDS as LEASE,
  LocalBlobStore,
  registerHost,
  type Storage,
  type StoredBlob,
  SweepFencedBlobStore,
  sweepArtifactBlobs,
} from "../src/index.js";
import { attemptCompletion, queuedJob } from "../src/testing/index.js";
import { DIALECTS, type DialectUnderTest } from "./dialects.js";
import { blockedOrSettled, deferred, held, withTwoStorages } from "./staged-transactions.js";

/**
 * The artifact retention sweep (artifact-blobs/): expired artifacts' bytes are deleted, and
 * never a live artifact's, a digest another kind of record names, or bytes a writer is putting
 * back. Two Storages over one database stand for two kiln-servers; every race is staged (a
 * transaction held open, a delete held at a gate, a put asleep on a ManualClock), never timed.
 */

const T0 = new Date("2026-11-22T07:00:00.000Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const TENANT = "acme";
const RETENTION = 3600;
const DAY = 86_400;
/** A moment when an artifact published at T0 with RETENTION is expired past the grace period. */
const LATE = RETENTION + GRACE + 10;
const NO_HANG = { timeout: 30 * 60_000 };
let jobs = 0;

interface World {
  readonly main: Storage;
  readonly other: Storage;
  /** The store underneath, as a sweep sees it. */
  readonly local: LocalBlobStore;
  readonly clock: ManualClock;
  /** What a kiln-server's writers put through, on `storage`. */
  fenced(storage: Storage): SweepFencedBlobStore;
}

async function withWorld(dialect: DialectUnderTest, test: (w: World) => Promise<void>): Promise<void> {
  await withTwoStorages(dialect, async (main, other) => {
    const root = mkdtempSync(join(tmpdir(), "kiln-artifact-blobs-"));
    try {
      await createTenant(main, { id: TENANT }, T0);
      await registerHost(main, { id: "host-a", vcpus: 64, memoryBytes: 2 ** 37, isolation: "sandbox", now: T0 });
      const local = new LocalBlobStore(root);
      const clock = new ManualClock(T0);
      await test({
        main,
        other,
        local,
        clock,
        fenced: (storage) => new SweepFencedBlobStore(local, { storage, clock }),
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
}

interface Placed {
  readonly jobId: string;
  readonly attempt: number;
  readonly leaseToken: string;
}

/** A job queued and claimed at `now` (a lease long enough never to lapse here). */
async function running(storage: Storage, now: Date, sourceManifest = "[]"): Promise<Placed> {
  jobs += 1;
  const id = `job_${String(jobs).padStart(4, "0")}`;
  await insertJob(
    storage,
    queuedJob(
      { id, tenant: TENANT, submissionKey: `k-${id}`, requestHash: `h-${id}`, queuedAt: now.toISOString() },
      { source_manifest: sourceManifest },
    ),
  );
  return claim(storage, id, now);
}

async function claim(storage: Storage, jobId: string, now: Date): Promise<Placed> {
  const placed = await claimNextJob(storage, {
    hostId: "host-a",
    freeVcpus: 64,
    vcpusOfSize: { "kiln2-cpu": 2 },
    leaseSeconds: 30 * DAY,
    now,
  });
  assert.equal(placed?.job.id, jobId);
  return { jobId, attempt: placed.attempt.number, leaseToken: placed.attempt.lease_token };
}

/** The attempt finishes passed at `now`, publishing `artifacts` served for `retention` seconds. */
function publish(
  storage: Storage,
  placed: Placed,
  now: Date,
  artifacts: readonly StoredBlob[],
  options: { retention?: number; cargoOutput?: StoredBlob; executable?: readonly boolean[] } = {},
) {
  return finishAttempt(storage, {
    ...placed,
    now,
    result: attemptCompletion("passed", {
      cargoOutput: options.cargoOutput ?? null,
      artifacts: artifacts.map((a, i) => ({
        path: `target/release/out-${i}`,
        bytes: a.bytes,
        sha256: a.sha256,
        ...(options.executable === undefined ? {} : { executable: options.executable[i] }),
      })),
      artifactRetentionSeconds: options.retention ?? RETENTION,
    }),
    meter: (attempt) => ({ size: attempt.size, seconds: 1, vcpuSeconds: attempt.vcpus }),
  });
}

async function stateOf(storage: Storage, sha256: string): Promise<string | undefined> {
  const row = await storage.db
    .selectFrom("artifact_blobs")
    .select("state")
    .where("sha256", "=", sha256)
    .executeTakeFirst();
  return row?.state;
}

/** A store over `inner` whose deletes are counted, and can be held at a gate or made to fail. */
class WatchedBlobStore implements BlobStore {
  readonly deletes = new Map<string, number>();
  gate: Promise<void> | null = null;
  readonly deleteStarted = deferred();
  failure: Error | null = null;

  constructor(private readonly inner: BlobStore) {}
  get location() {
    return this.inner.location;
  }
  put(bytes: Uint8Array, sha256?: string): Promise<StoredBlob> {
    return this.inner.put(bytes, sha256);
  }
  get stagingDirectory() {
    return this.inner.stagingDirectory;
  }
  putFile(path: string, digest: string): Promise<StoredBlob> {
    return this.inner.putFile(path, digest);
  }
  get(sha256: string): Promise<Buffer> {
    return this.inner.get(sha256);
  }
  has(sha256: string): Promise<boolean> {
    return this.inner.has(sha256);
  }
  openRead(sha256: string): Promise<BlobReadStream | undefined> {
    return this.inner.openRead(sha256);
  }
  probeWritable(): Promise<void> {
    return this.inner.probeWritable();
  }
  async delete(sha256: string): Promise<void> {
    this.deleteStarted.resolve();
    if (this.gate !== null) await this.gate;
    if (this.failure !== null) throw this.failure;
    this.deletes.set(sha256, (this.deletes.get(sha256) ?? 0) + 1);
    await this.inner.delete(sha256);
  }
}

/** Waits (turn by turn, no deadline of its own) until `condition` holds. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 1));
}

for (const dialect of DIALECTS) {
  describe(`artifact retention sweep [${dialect.name}]`, { skip: dialect.skip }, () => {
    it("deletes an expired artifact's bytes once the grace period is over, and keeps a tombstone", NO_HANG, () =>
      withWorld(dialect, async (w) => {
        const stored = await w.fenced(w.main).put(randomBytes(1000));
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [stored]), "finished");
        assert.equal(await stateOf(w.main, stored.sha256), "held");

        const early = await sweepArtifactBlobs(w.main, w.local, { now: at(RETENTION + GRACE - 1) });
        assert.equal(early.deleted, 0, "expired, but within the grace period");
        assert.ok(await w.local.has(stored.sha256));

        const due = await sweepArtifactBlobs(w.main, w.local, { now: at(RETENTION + GRACE + 1) });
        assert.deepEqual(
          { deleted: due.deleted, deletedBytes: due.deletedBytes, shared: due.shared, failures: due.failures },
          { deleted: 1, deletedBytes: 1000, shared: 0, failures: [] },
        );
        assert.equal(await w.local.has(stored.sha256), false, "the bytes are gone");
        assert.equal(await stateOf(w.main, stored.sha256), "deleted");
        assert.equal((await sweepArtifactBlobs(w.main, w.local, { now: at(LATE + DAY) })).examined, 0);
      }),
    );

    it(
      "keeps each published file's execute bit (migration 0044); a host that does not say: not executable",
      NO_HANG,
      () =>
        withWorld(dialect, async (w) => {
          const blobs = [await w.fenced(w.main).put(randomBytes(100)), await w.fenced(w.main).put(randomBytes(101))];
          const placed = await running(w.main, T0);
          assert.equal(await publish(w.main, placed, T0, blobs, { executable: [true, false] }), "finished");
          const older = await running(w.main, T0);
          assert.equal(await publish(w.main, older, T0, [blobs[0] as StoredBlob]), "finished");
          const rows = await w.main.db
            .selectFrom("artifacts")
            .select(["job_id", "path", "executable"])
            .where("job_id", "in", [placed.jobId, older.jobId])
            .orderBy("job_id")
            .orderBy("path")
            .execute();
          assert.deepEqual(
            rows.map((r) => [r.job_id === placed.jobId ? "new" : "old", r.path, Number(r.executable)]).sort(),
            [
              ["new", "target/release/out-0", 1],
              ["new", "target/release/out-1", 0],
              ["old", "target/release/out-0", 0],
            ],
          );
        }),
    );

    it("keeps a digest an unexpired artifact still serves, and deletes it once that one expires", NO_HANG, () =>
      withWorld(dialect, async (w) => {
        const store = w.fenced(w.main);
        const bytes = randomBytes(2000);
        const first = await store.put(bytes);
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [first]), "finished");
        const second = await store.put(bytes);
        const later = at(2 * 3600);
        assert.equal(
          await publish(w.main, await running(w.main, later), later, [second], { retention: DAY }),
          "finished",
        );

        const kept = await sweepArtifactBlobs(w.main, w.local, { now: at(LATE) });
        assert.equal(kept.deleted, 0, "the second job's artifact is served until a day after it was published");
        assert.ok(await w.local.has(first.sha256));

        const due = await sweepArtifactBlobs(w.main, w.local, { now: at(2 * 3600 + DAY + GRACE + 1) });
        assert.equal(due.deleted, 1);
        assert.equal(await w.local.has(first.sha256), false);
      }),
    );

    it("never deletes a digest another kind names: Cargo output, a job's source, a source chunk", NO_HANG, () =>
      withWorld(dialect, async (w) => {
        const store = w.fenced(w.main);
        const output = await store.put(randomBytes(300));
        const source = await store.put(randomBytes(400));
        const chunk = await store.put(randomBytes(500));
        // An artifact whose bytes are another attempt's Cargo output.
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [output]), "finished");
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [], { cargoOutput: output }), "finished");
        // An artifact that is a copy of a file of its job's inline source.
        const manifest = JSON.stringify([{ path: "data.bin", sha256: source.sha256, bytes: 400, executable: false }]);
        assert.equal(await publish(w.main, await running(w.main, T0, manifest), T0, [source]), "finished");
        // An artifact whose bytes a tenant's source chunk index holds.
        await w.main.db
          .insertInto("source_chunks")
          .values({ tenant_id: TENANT, sha256: chunk.sha256, bytes: 500, stored_at: T0.toISOString() })
          .execute();
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [chunk]), "finished");

        const swept = await sweepArtifactBlobs(w.main, w.local, { now: at(LATE) });
        assert.deepEqual({ deleted: swept.deleted, shared: swept.shared }, { deleted: 0, shared: 3 });
        for (const blob of [output, source, chunk]) {
          assert.ok(await w.local.has(blob.sha256), `${blob.sha256} is kept`);
          assert.equal(await stateOf(w.main, blob.sha256), "shared");
        }
        assert.equal((await sweepArtifactBlobs(w.main, w.local, { now: at(LATE + DAY) })).examined, 0, "for good");
      }),
    );

    it("a publication holding its digest's lock first: the sweep waits, then keeps the bytes", NO_HANG, () =>
      withWorld(dialect, async (w) => {
        const stored = await w.fenced(w.main).put(randomBytes(1000));
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [stored]), "finished");
        // The host of a second job stored the same bytes at T0 (found, so not written again) and
        // reports only now, when the first job's artifact is expired past the grace period.
        const second = await running(w.main, T0);
        const holding = held(w.other);
        const publishing = publish(holding.storage, second, at(LATE), [stored]);
        await holding.ready;
        const sweeping = sweepArtifactBlobs(w.main, w.local, { now: at(LATE) });
        assert.equal(await blockedOrSettled(w.main, sweeping), "pending", "the mark waits for the publication");
        holding.release();
        assert.equal(await publishing, "finished");
        assert.equal((await sweeping).deleted, 0, "the publication touched the digest and serves it");
        assert.ok(await w.local.has(stored.sha256), "the live artifact's bytes are there");
        assert.equal(await stateOf(w.main, stored.sha256), "held");
      }),
    );

    it(
      "the sweep's mark first: the publication waits, finds its bytes swept, and the job's retry puts them back",
      NO_HANG,
      () =>
        withWorld(dialect, async (w) => {
          const bytes = randomBytes(1000);
          const stored = await w.fenced(w.main).put(bytes);
          assert.equal(await publish(w.main, await running(w.main, T0), T0, [stored]), "finished");
          const second = await running(w.main, T0);
          const holding = held(w.other);
          const sweeping = sweepArtifactBlobs(holding.storage, w.local, { now: at(LATE) });
          await holding.ready;
          const publishing = publish(w.main, second, at(LATE), [stored]);
          assert.equal(await blockedOrSettled(w.main, publishing), "pending", "the publication waits for the mark");
          holding.release();
          assert.equal((await sweeping).deleted, 1);
          assert.equal(await publishing, "stale", "its result does not stand");
          const job = await w.main.db
            .selectFrom("jobs")
            .selectAll()
            .where("id", "=", second.jobId)
            .executeTakeFirstOrThrow();
          assert.equal(job.status, "queued", "the job tries again");
          assert.match(job.queue_annotation ?? "", /swept before publication/);
          const artifacts = await w.main.db
            .selectFrom("artifacts")
            .select("idx")
            .where("job_id", "=", second.jobId)
            .execute();
          assert.deepEqual(artifacts, [], "nothing was published without its bytes");

          // The retry stores the bytes again (the digest was swept, so they are written) and publishes them.
          await w.clock.advance(LATE * 1000);
          assert.deepEqual(await w.fenced(w.main).put(bytes), stored);
          assert.ok(await w.local.has(stored.sha256));
          assert.equal(await stateOf(w.main, stored.sha256), "held");
          const retry = await claim(w.main, second.jobId, at(LATE));
          assert.equal(await publish(w.main, retry, at(LATE), [stored]), "finished");
          assert.equal((await sweepArtifactBlobs(w.main, w.local, { now: at(LATE + 60) })).deleted, 0);
          assert.ok(await w.local.has(stored.sha256));
        }),
    );

    it("a put of bytes being deleted waits for the delete, then writes them back", NO_HANG, () =>
      withWorld(dialect, async (w) => {
        const bytes = randomBytes(1000);
        const stored = await w.fenced(w.main).put(bytes);
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [stored]), "finished");
        const gated = new WatchedBlobStore(w.local);
        const gate = deferred();
        gated.gate = gate.promise;
        const sweeping = sweepArtifactBlobs(w.main, gated, { now: at(LATE) });
        await gated.deleteStarted.promise;
        assert.equal(await stateOf(w.main, stored.sha256), "deleting", "the mark committed; the delete is under way");

        // Another server's writer stores the same bytes now: were it to skip (the blob is still
        // there), the delete would take them.
        await w.clock.advance(LATE * 1000);
        let put = false;
        const putting = w
          .fenced(w.other)
          .put(bytes)
          .then((result) => {
            put = true;
            return result;
          });
        await until(() => w.clock.pending > 0 || put);
        assert.equal(put, false, "the put waits, asleep on the clock");

        gate.resolve();
        assert.equal((await sweeping).deleted, 1);
        assert.equal(await w.local.has(stored.sha256), false);
        await w.clock.advance(20);
        assert.deepEqual(await putting, stored);
        assert.ok(await w.local.has(stored.sha256), "written after the delete");
        assert.equal(await stateOf(w.main, stored.sha256), "held");
        const second = await running(w.main, at(LATE));
        assert.equal(await publish(w.main, second, at(LATE), [stored]), "finished");
        assert.ok((await w.local.get(stored.sha256)).equals(bytes));
      }),
    );

    it(
      "two sweeps racing for one digest: the second waits for the first's mark, and the blob is deleted once",
      NO_HANG,
      () =>
        withWorld(dialect, async (w) => {
          const stored = await w.fenced(w.main).put(randomBytes(1000));
          assert.equal(await publish(w.main, await running(w.main, T0), T0, [stored]), "finished");
          const watched = new WatchedBlobStore(w.local);
          const holding = held(w.other);
          const first = sweepArtifactBlobs(holding.storage, watched, { now: at(LATE) });
          await holding.ready;
          const second = sweepArtifactBlobs(w.main, watched, { now: at(LATE) });
          assert.equal(await blockedOrSettled(w.main, second), "pending", "the second mark waits for the first");
          holding.release();
          assert.equal((await first).deleted, 1);
          assert.equal((await second).deleted, 0);
          assert.deepEqual([...watched.deletes.values()], [1]);
        }),
    );

    it("two sweeps at once over many digests: each expired blob deleted once, the live one kept", NO_HANG, () =>
      withWorld(dialect, async (w) => {
        const store = w.fenced(w.main);
        const expired: StoredBlob[] = [];
        for (let i = 0; i < 12; i++) expired.push(await store.put(randomBytes(100 + i)));
        assert.equal(await publish(w.main, await running(w.main, T0), T0, expired), "finished");
        const live = await store.put(randomBytes(64));
        const recently = at(LATE - 60);
        assert.equal(await publish(w.main, await running(w.main, recently), recently, [live]), "finished");

        const watched = new WatchedBlobStore(w.local);
        const [a, b] = await Promise.all([
          sweepArtifactBlobs(w.main, watched, { now: at(LATE) }),
          sweepArtifactBlobs(w.other, watched, { now: at(LATE) }),
        ]);
        assert.equal(a.deleted + b.deleted, 12);
        assert.deepEqual([...a.failures, ...b.failures], []);
        assert.deepEqual(
          expired.map((blob) => watched.deletes.get(blob.sha256)),
          expired.map(() => 1),
          "each deleted exactly once",
        );
        for (const blob of expired) assert.equal(await w.local.has(blob.sha256), false);
        assert.ok(await w.local.has(live.sha256), "the live artifact's bytes stay");
      }),
    );

    it("a delete that fails leaves the mark: puts wait out its lease, and a later sweep finishes it", NO_HANG, () =>
      withWorld(dialect, async (w) => {
        const stored = await w.fenced(w.main).put(randomBytes(1000));
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [stored]), "finished");
        const failing = new WatchedBlobStore(w.local);
        failing.failure = new Error("the store is unreachable");
        const failed = await sweepArtifactBlobs(w.main, failing, { now: at(LATE) });
        assert.equal(failed.deleted, 0);
        assert.equal(failed.failures.length, 1);
        assert.match(String(failed.failures[0]?.error), /unreachable/);
        assert.equal(await stateOf(w.main, stored.sha256), "deleting");
        assert.deepEqual(await clearBlobForPut(w.main, { sha256: stored.sha256, now: at(LATE + 1) }), { kind: "wait" });

        assert.equal((await sweepArtifactBlobs(w.main, w.local, { now: at(LATE + LEASE - 1) })).deleted, 0);
        const after = await sweepArtifactBlobs(w.main, w.local, { now: at(LATE + LEASE + 1) });
        assert.equal(after.deleted, 1, "the stale mark is taken over and finished");
        assert.equal(await w.local.has(stored.sha256), false);
        assert.equal(await stateOf(w.main, stored.sha256), "deleted");
      }),
    );

    it("a put over a stale mark starts over when a sweep took the mark over before it confirmed", NO_HANG, () =>
      withWorld(dialect, async (w) => {
        const bytes = randomBytes(1000);
        const stored = await w.fenced(w.main).put(bytes);
        assert.equal(await publish(w.main, await running(w.main, T0), T0, [stored]), "finished");
        const failing = new WatchedBlobStore(w.local);
        failing.failure = new Error("the store is unreachable");
        assert.equal((await sweepArtifactBlobs(w.main, failing, { now: at(LATE) })).failures.length, 1);

        const now = at(LATE + LEASE + 1);
        const clearance = await clearBlobForPut(w.main, { sha256: stored.sha256, now });
        assert.ok(clearance.kind === "write" && clearance.ticket?.state === "deleting", "a stale mark is written over");
        await w.local.put(bytes);
        // Meanwhile a sweep takes the stale mark over and deletes the bytes just written.
        assert.equal((await sweepArtifactBlobs(w.other, w.local, { now })).deleted, 1);
        assert.equal(await confirmBlobPut(w.main, { sha256: stored.sha256, ticket: clearance.ticket, now }), "retry");
        assert.equal(await stateOf(w.main, stored.sha256), "deleted", "not held: its bytes are gone");

        const again = await clearBlobForPut(w.main, { sha256: stored.sha256, now });
        assert.ok(again.kind === "write" && again.ticket !== null);
        await w.local.put(bytes);
        assert.equal(await confirmBlobPut(w.main, { sha256: stored.sha256, ticket: again.ticket, now }), "confirmed");
        assert.equal(await stateOf(w.main, stored.sha256), "held");
        assert.ok(await w.local.has(stored.sha256));
      }),
    );
  });
}
