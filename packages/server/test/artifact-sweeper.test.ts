import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import type { Logger, LoopFailure } from "@kiln/contract";
import { ManualClock } from "@kiln/contract/testing";
import {
  ARTIFACT_BLOB_GRACE_SECONDS,
  ARTIFACT_BLOB_MARK_LEASE_SECONDS,
  type BlobReadStream,
  type BlobStore,
  type StoredBlob,
} from "@kiln/storage";
import { DIALECTS } from "@kiln/storage/testing";
import {
  type ArtifactSweepPass,
  startArtifactSweeper,
  sweepArtifactBytes,
} from "../src/domain/jobs/artifact-sweeper.js";
import { bearer, personWithToken } from "../src/testing/harness.js";
import { acceptJob, claimJob, finishJob, type JobsTestApp, jobsTestApp } from "../src/testing/job-fixtures.js";

const RETENTION = 3600;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** A store over `inner` whose deletes fail while `failing` is set. */
class FlakyBlobStore implements BlobStore {
  failing = true;
  constructor(private readonly inner: BlobStore) {}
  get location() {
    return this.inner.location;
  }
  put(bytes: Uint8Array, verified?: string): Promise<StoredBlob> {
    return this.inner.put(bytes, verified);
  }
  get stagingDirectory() {
    return this.inner.stagingDirectory;
  }
  putFile(path: string, digest: string): Promise<StoredBlob> {
    return this.inner.putFile(path, digest);
  }
  get(digest: string): Promise<Buffer> {
    return this.inner.get(digest);
  }
  has(digest: string): Promise<boolean> {
    return this.inner.has(digest);
  }
  openRead(digest: string): Promise<BlobReadStream | undefined> {
    return this.inner.openRead(digest);
  }
  probeWritable(): Promise<void> {
    return this.inner.probeWritable();
  }
  async delete(digest: string): Promise<void> {
    if (this.failing) throw new Error("the bucket answered 503 SlowDown");
    await this.inner.delete(digest);
  }
}

/** Resolves with the next value `listen` is given. */
function next<T>(): { listen: (value: T) => void; promise: Promise<T> } {
  let listen: (value: T) => void = () => {};
  const promise = new Promise<T>((resolve) => {
    listen = resolve;
  });
  return { listen: (value) => listen(value), promise };
}

for (const dialect of DIALECTS) {
  describe(`artifact sweeper (${dialect.name})`, { skip: dialect.skip }, () => {
    let t: JobsTestApp;
    let owner: { tenant: string; token: string };
    before(async () => {
      t = await jobsTestApp(await dialect.openFresh());
      owner = await personWithToken(t.storage, { role: "owner" });
    });
    after(() => t.close());

    const get = (url: string) => t.app.inject({ method: "GET", url, headers: bearer(owner.token) });

    /** A job of the owner's tenant that passed now, with `files` as artifacts and `output` as its Cargo output. */
    async function passedJob(files: readonly Buffer[], output: Buffer): Promise<string> {
      const job = await acceptJob(t.storage, { tenant: owner.tenant, now: t.clock.now() });
      const lease = await claimJob(t.storage, job.id, t.clock.now());
      await finishJob(t.storage, t.blobs, lease, {
        now: t.clock.now(),
        cargoOutput: output,
        artifacts: files.map((bytes, i) => ({ path: `release/file-${i}`, bytes })),
        retentionSeconds: RETENTION,
      });
      return job.id;
    }

    it("a pass deletes expired artifacts' bytes: they stay gone, the Cargo output stays served", async () => {
      const files = [Buffer.from(`artifact one of ${dialect.name}`), Buffer.from(`artifact two of ${dialect.name}`)];
      const job = await passedJob(files, Buffer.from("   Compiling widget v0.1.0\n"));
      assert.equal((await get(`/api/jobs/${job}/artifacts/1/0`)).body, files[0]?.toString());

      await t.clock.advance((RETENTION + ARTIFACT_BLOB_GRACE_SECONDS - 1) * 1000);
      assert.equal((await get(`/api/jobs/${job}/artifacts/1/0`)).statusCode, 410, "expired: gone");
      assert.equal((await sweepArtifactBytes({ storage: t.storage, blobs: t.blobs, clock: t.clock })).deleted, 0);
      await t.clock.advance(2000);
      const pass = await sweepArtifactBytes({ storage: t.storage, blobs: t.blobs, clock: t.clock });
      assert.deepEqual(pass, {
        deleted: 2,
        deletedBytes: files.reduce((sum, f) => sum + f.length, 0),
        shared: 0,
        failures: 0,
      });
      for (const file of files)
        assert.equal(await t.blobs.has(sha256(file)), false, "the bytes no longer cost storage");
      for (const url of [`/api/jobs/${job}/artifacts`, `/api/jobs/${job}/artifacts/1/0`]) {
        const res = await get(url);
        assert.equal(res.statusCode, 410, url);
        assert.equal(res.json().code, "gone");
      }
      const output = await get(`/api/jobs/${job}/attempts/1/cargo-output`);
      assert.equal(output.statusCode, 200);
      assert.equal(output.body, "   Compiling widget v0.1.0\n");
    });

    it("one pass works through more digests than one storage call takes", async () => {
      const files = Array.from({ length: 205 }, (_, i) =>
        Buffer.from(`file ${i} of a big publication (${dialect.name})`),
      );
      await passedJob(files, Buffer.from(`output of the big publication (${dialect.name})`));
      await t.clock.advance((RETENTION + ARTIFACT_BLOB_GRACE_SECONDS + 1) * 1000);
      const pass = await sweepArtifactBytes({ storage: t.storage, blobs: t.blobs, clock: t.clock });
      assert.equal(pass.deleted, 205);
      for (const file of files) assert.equal(await t.blobs.has(sha256(file)), false);
    });

    it("a failing pass is logged and emitted as the loop's failure; a later pass finishes the digest", async () => {
      const file = Buffer.from(`an artifact whose store fails (${dialect.name})`);
      await passedJob([file], Buffer.from(`output (${dialect.name})`));
      const clock = new ManualClock(
        new Date(t.clock.now().getTime() + (RETENTION + ARTIFACT_BLOB_GRACE_SECONDS + 1) * 1000),
      );
      const flaky = new FlakyBlobStore(t.blobs);
      const logged: string[] = [];
      const log: Logger = { error: (_details, message) => logged.push(message), warn: () => {}, info: () => {} };
      const failure = next<LoopFailure>();
      let passed = next<ArtifactSweepPass>();
      const everyMs = 3_600_000;
      const loop = startArtifactSweeper(
        {
          storage: t.storage,
          blobs: flaky,
          clock,
          log,
          onFailure: failure.listen,
          onPass: (pass) => passed.listen(pass),
        },
        everyMs,
      );
      try {
        await clock.advance(everyMs);
        const failed = await failure.promise;
        assert.equal(failed.loop, "artifact sweeper");
        assert.match(String(failed.error), /1 artifact blob\(s\) could not be swept.*503 SlowDown/);
        assert.ok(
          logged.some((line) => /could not be swept/.test(line)),
          "and in the operator log",
        );
        assert.ok(await t.blobs.has(sha256(file)), "nothing deleted");

        // The store recovers; once the mark's lease is over, the next pass takes it over and finishes.
        passed = next<ArtifactSweepPass>();
        flaky.failing = false;
        await clock.advance((ARTIFACT_BLOB_MARK_LEASE_SECONDS + 1) * 1000);
        await clock.advance(everyMs);
        assert.equal((await passed.promise).deleted, 1);
        assert.equal(await t.blobs.has(sha256(file)), false);
      } finally {
        await loop.stop();
      }
    });
  });
}
