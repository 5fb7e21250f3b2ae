import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { buffer } from "node:stream/consumers";
import { after, before, describe, it } from "node:test";
import { HeadObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import {
  type BlobStore,
  discardStagedBlob,
  isBlobNotFound,
  LocalBlobStore,
  removeStaleStagedBlobs,
  S3BlobStore,
  StagedBlobTooLargeError,
  stageBlob,
} from "../src/index.js";
import { type S3TestServer, startS3TestServer } from "../src/testing/index.js";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const MiB = 1024 * 1024;

/** One store under test: how to make it, and where its blob of a digest must be found. */
interface StoreUnderTest {
  readonly name: string;
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
  /** A store with multipart uploads (where it has them) from 5 MiB, in 5 MiB parts. */
  store(): BlobStore;
  /** True when the blob of `digest` sits where the naming rule says, looked up behind the store's back. */
  heldAt(digest: string): Promise<boolean>;
}

const local = ((): StoreUnderTest => {
  let root = "";
  return {
    name: "LocalBlobStore",
    setUp: async () => {
      root = mkdtempSync(join(tmpdir(), "kiln-blobs-"));
    },
    tearDown: async () => rmSync(root, { recursive: true, force: true }),
    store: () => new LocalBlobStore(root),
    heldAt: async (digest) => existsSync(join(root, digest.slice(0, 2), digest)),
  };
})();

let s3: S3TestServer | undefined;
const s3rver = (): S3TestServer => {
  assert.ok(s3, "s3rver is running");
  return s3;
};
const PREFIX = "tenant-blobs/v1";

const onS3rver: StoreUnderTest = {
  name: "S3BlobStore on s3rver",
  setUp: async () => {
    s3 = await startS3TestServer();
  },
  tearDown: async () => s3?.stop(),
  store: () => s3rver().store(PREFIX, { multipartThresholdBytes: 5 * MiB, partBytes: 5 * MiB }),
  heldAt: async (digest) => {
    try {
      await s3rver()
        .client()
        .send(new HeadObjectCommand({ Bucket: s3rver().bucket, Key: `${PREFIX}/${digest.slice(0, 2)}/${digest}` }));
      return true;
    } catch (error) {
      if ((error as Error).name === "NotFound") return false;
      throw error;
    }
  },
};

for (const under of [local, onS3rver]) {
  describe(`blob store: ${under.name}`, () => {
    before(() => under.setUp());
    after(() => under.tearDown());

    it("stores bytes under their SHA-256 and reads them back, whole and streamed", async () => {
      const blobs = under.store();
      const bytes = randomBytes(150_000);
      const stored = await blobs.put(bytes);
      assert.deepEqual(stored, { sha256: sha256(bytes), bytes: bytes.length });
      assert.ok(await under.heldAt(stored.sha256), "the blob is named <sha[0:2]>/<sha>");
      assert.ok(await blobs.has(stored.sha256));
      assert.ok((await blobs.get(stored.sha256)).equals(bytes));
      const opened = await blobs.openRead(stored.sha256);
      assert.ok(opened);
      assert.equal(opened.bytes, bytes.length);
      assert.ok((await buffer(opened.stream)).equals(bytes));
    });

    it("stores the empty blob", async () => {
      const blobs = under.store();
      const stored = await blobs.put(new Uint8Array(0));
      assert.equal(stored.sha256, sha256(new Uint8Array(0)));
      assert.equal((await blobs.get(stored.sha256)).length, 0);
    });

    it("takes a digest the caller verified, naming the blob by it", async () => {
      const blobs = under.store();
      const bytes = randomBytes(1000);
      const digest = sha256(bytes);
      assert.equal((await blobs.put(bytes, digest)).sha256, digest);
      assert.ok(await under.heldAt(digest));
      assert.ok((await blobs.get(digest)).equals(bytes));
    });

    it("stores the same bytes twice as one blob", async () => {
      const blobs = under.store();
      const bytes = randomBytes(4096);
      const first = await blobs.put(bytes);
      const second = await blobs.put(Buffer.from(bytes));
      assert.deepEqual(second, first);
      assert.ok((await blobs.get(first.sha256)).equals(bytes));
    });

    it("round-trips an object above the multipart threshold", async () => {
      const blobs = under.store();
      const bytes = randomBytes(11 * MiB);
      const stored = await blobs.put(bytes);
      assert.equal(stored.sha256, sha256(bytes));
      assert.ok(await under.heldAt(stored.sha256));
      assert.ok((await blobs.get(stored.sha256)).equals(bytes));
      const opened = await blobs.openRead(stored.sha256);
      assert.ok(opened);
      assert.equal(opened.bytes, bytes.length);
      assert.ok((await buffer(opened.stream)).equals(bytes));
    });

    it("answers a missing blob as absent: has false, get not found, openRead undefined", async () => {
      const blobs = under.store();
      const missing = sha256(randomBytes(32));
      assert.equal(await blobs.has(missing), false);
      await assert.rejects(blobs.get(missing), (error) => isBlobNotFound(error));
      assert.equal(await blobs.openRead(missing), undefined);
    });

    it("deletes a blob, and deleting one it does not hold is no error", async () => {
      const blobs = under.store();
      const bytes = randomBytes(20_000);
      const kept = await blobs.put(randomBytes(500));
      const stored = await blobs.put(bytes);
      await blobs.delete(stored.sha256);
      assert.equal(await under.heldAt(stored.sha256), false, "gone from where the naming rule puts it");
      assert.equal(await blobs.has(stored.sha256), false);
      await assert.rejects(blobs.get(stored.sha256), (error) => isBlobNotFound(error));
      assert.equal(await blobs.openRead(stored.sha256), undefined);
      await blobs.delete(stored.sha256);
      await blobs.delete(sha256(randomBytes(32)));
      assert.ok(await under.heldAt(kept.sha256), "another blob is untouched");
      // Put again after a delete: written anew, not skipped as already held.
      await blobs.put(bytes);
      assert.ok((await blobs.get(stored.sha256)).equals(bytes));
    });

    it("refuses a name that is not a digest", async () => {
      const blobs = under.store();
      await assert.rejects(blobs.get("../../etc/passwd"), /not a sha256 digest/);
      await assert.rejects(blobs.put(new Uint8Array(1), "ABC"), /not a sha256 digest/);
      await assert.rejects(blobs.delete("../../etc/passwd"), /not a sha256 digest/);
    });

    it("converges when several writers put the same bytes at once", async () => {
      const blobs = under.store();
      const bytes = randomBytes(300_000);
      const results = await Promise.all(Array.from({ length: 6 }, () => blobs.put(Buffer.from(bytes))));
      for (const result of results) assert.deepEqual(result, { sha256: sha256(bytes), bytes: bytes.length });
      assert.ok((await blobs.get(sha256(bytes))).equals(bytes));
      // A second store (another kiln-server on the same place) sees the one blob.
      assert.ok((await under.store().get(sha256(bytes))).equals(bytes));
    });

    it("is writable where it was set up", async () => {
      await under.store().probeWritable();
    });

    it("stores streamed bytes from their staging file, hashed as they passed, only when told to", async () => {
      const blobs = under.store();
      for (const size of [0, 70_000, 3 * MiB + 17, 11 * MiB]) {
        const bytes = randomBytes(size);
        const staged = await stageBlob(blobs.stagingDirectory, chunksOf(bytes), 16 * MiB);
        assert.deepEqual({ sha256: staged.sha256, bytes: staged.bytes }, { sha256: sha256(bytes), bytes: size });
        assert.ok(readFileSync(staged.path).equals(bytes), "the staging file holds the bytes");
        // (The empty blob is stored by an earlier test.)
        if (size > 0) assert.equal(await under.heldAt(staged.sha256), false, "nothing stored before putFile");
        assert.deepEqual(await blobs.putFile(staged.path, staged.sha256), { sha256: staged.sha256, bytes: size });
        assert.ok(await under.heldAt(staged.sha256));
        assert.ok((await blobs.get(staged.sha256)).equals(bytes));
        assert.ok(existsSync(staged.path), "the staging file is left for its writer");
        // Stored again (already held): a no-op; then the writer removes its file and the blob stays.
        await blobs.putFile(staged.path, staged.sha256);
        await discardStagedBlob(staged.path);
        await discardStagedBlob(staged.path);
        assert.equal(existsSync(staged.path), false);
        assert.ok((await blobs.get(staged.sha256)).equals(bytes));
      }
    });

    it("leaves nothing when streamed bytes pass their limit or their source fails", async () => {
      const blobs = under.store();
      const before = stagedFiles(blobs);
      const bytes = randomBytes(2 * MiB);
      await assert.rejects(stageBlob(blobs.stagingDirectory, chunksOf(bytes), 2 * MiB - 1), StagedBlobTooLargeError);
      async function* failing() {
        yield bytes.subarray(0, MiB);
        throw new Error("the client went away");
      }
      await assert.rejects(stageBlob(blobs.stagingDirectory, failing(), 4 * MiB), /the client went away/);
      assert.deepEqual(stagedFiles(blobs), before, "no staging file left");
      assert.equal(await under.heldAt(sha256(bytes)), false, "nothing stored");
    });
  });
}

/** `bytes` as a stream of uneven chunks, as sockets deliver them (each a fresh copy). */
async function* chunksOf(bytes: Buffer): AsyncGenerator<Uint8Array> {
  const sizes = [1, 65_536, 300_000, 7, 2 * MiB];
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = Math.min(sizes[i % sizes.length] ?? 1, bytes.length - at);
    yield Buffer.from(bytes.subarray(at, at + n));
    at += n;
  }
}

const stagedFiles = (blobs: BlobStore): string[] =>
  existsSync(blobs.stagingDirectory) ? readdirSync(blobs.stagingDirectory).sort() : [];

describe("LocalBlobStore specifics", () => {
  it("leaves no temporary file after concurrent writers of one blob", async () => {
    const root = mkdtempSync(join(tmpdir(), "kiln-blobs-"));
    try {
      const blobs = new LocalBlobStore(root);
      const bytes = randomBytes(2 * MiB);
      await Promise.all([blobs.put(bytes), blobs.put(bytes), blobs.put(bytes)]);
      const digest = sha256(bytes);
      assert.deepEqual(readdirSync(join(root, digest.slice(0, 2))), [digest]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("removes staging files left by a killed process, not those being written", async () => {
    const root = mkdtempSync(join(tmpdir(), "kiln-blobs-"));
    try {
      const blobs = new LocalBlobStore(root);
      const stale = await stageBlob(blobs.stagingDirectory, chunksOf(randomBytes(1000)), MiB);
      const fresh = await stageBlob(blobs.stagingDirectory, chunksOf(randomBytes(1000)), MiB);
      const hourAgo = new Date(Date.now() - 3_600_000);
      utimesSync(stale.path, hourAgo, hourAgo);
      writeFileSync(join(blobs.stagingDirectory, "not-a-staging-file"), "kept");
      assert.equal(await removeStaleStagedBlobs(blobs.stagingDirectory, new Date(Date.now() - 60_000)), 1);
      assert.deepEqual(readdirSync(blobs.stagingDirectory).sort(), [basename(fresh.path), "not-a-staging-file"].sort());
      assert.equal(await removeStaleStagedBlobs(join(root, "never-made"), new Date()), 0);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("is not writable at a root that does not exist", async () => {
    await assert.rejects(new LocalBlobStore("/nonexistent/kiln-blobs").probeWritable(), { code: "ENOENT" });
  });
});

describe("S3BlobStore specifics (s3rver)", () => {
  let server: S3TestServer;
  before(async () => {
    server = await startS3TestServer("kiln-specifics");
  });
  after(() => server.stop());
  const sent = async (work: () => Promise<unknown>): Promise<string[]> => {
    const from = server.commandsSent.length;
    await work();
    return server.commandsSent.slice(from);
  };
  const store = () => server.store("p", { multipartThresholdBytes: 5 * MiB, partBytes: 5 * MiB });
  const keyOf = (digest: string) => `p/${digest.slice(0, 2)}/${digest}`;

  it("uploads below the threshold in one PutObject and skips the upload when the object exists", async () => {
    const blobs = store();
    const bytes = randomBytes(64 * 1024);
    assert.deepEqual(await sent(() => blobs.put(bytes)), ["HeadObjectCommand", "PutObjectCommand"]);
    assert.deepEqual(
      await sent(() => blobs.put(bytes)),
      ["HeadObjectCommand"],
      "an object already held is not uploaded again",
    );
  });

  it("deletes with one DeleteObject", async () => {
    const blobs = store();
    const stored = await blobs.put(randomBytes(1000));
    assert.deepEqual(await sent(() => blobs.delete(stored.sha256)), ["DeleteObjectCommand"]);
    assert.equal(await blobs.has(stored.sha256), false);
  });

  it("uploads above the threshold in parts", async () => {
    const bytes = randomBytes(11 * MiB);
    const commands = await sent(() => store().put(bytes));
    assert.deepEqual(
      commands.filter((c) => c !== "UploadPartCommand"),
      ["HeadObjectCommand", "CreateMultipartUploadCommand", "CompleteMultipartUploadCommand"],
    );
    assert.equal(commands.filter((c) => c === "UploadPartCommand").length, 3, "11 MiB in 5 MiB parts");
    assert.ok((await store().get(sha256(bytes))).equals(bytes));
  });

  it("refuses to hand on an object whose bytes do not match its name", async () => {
    const blobs = store();
    const bytes = randomBytes(1000);
    const digest = sha256(bytes);
    const other = randomBytes(1000);
    await server.client().send(new PutObjectCommand({ Bucket: server.bucket, Key: keyOf(digest), Body: other }));
    await assert.rejects(blobs.get(digest), (error) => !isBlobNotFound(error) && /hashing to/.test(String(error)));
    const opened = await blobs.openRead(digest);
    assert.ok(opened);
    await assert.rejects(buffer(opened.stream), /hashing to/);
  });

  it("writes again an object of the wrong length under a blob's name", async () => {
    const blobs = store();
    const bytes = randomBytes(2000);
    const digest = sha256(bytes);
    await server
      .client()
      .send(new PutObjectCommand({ Bucket: server.bucket, Key: keyOf(digest), Body: bytes.subarray(0, 700) }));
    await blobs.put(bytes);
    assert.ok((await blobs.get(digest)).equals(bytes));
  });

  it("is not writable on a bucket that does not exist, and says so rather than 'missing blob'", async () => {
    const location = { bucket: "no-such-bucket", prefix: "", endpoint: server.endpoint, region: "us-east-1" };
    const blobs = S3BlobStore.at(
      { ...location, forcePathStyle: true },
      { clientConfig: { credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } } },
    );
    await assert.rejects(blobs.probeWritable());
    await assert.rejects(blobs.get(sha256(randomBytes(8))), (error) => !isBlobNotFound(error));
  });
});
