import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { LocalBlobStore } from "../src/index.js";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

describe("LocalBlobStore", () => {
  const root = mkdtempSync(join(tmpdir(), "kiln-blobs-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const blobs = new LocalBlobStore(root);

  // Small blobs take the synchronous path, large ones (over 1 MiB) the asynchronous one.
  for (const size of [0, 150_000, 6 * 1024 * 1024]) {
    it(`stores and reads back ${size} bytes under their digest, leaving no temporary file`, async () => {
      const bytes = randomBytes(size);
      const stored = await blobs.put(bytes);
      assert.deepEqual(stored, { sha256: sha256(bytes), bytes: size });
      assert.ok(await blobs.has(stored.sha256));
      assert.ok((await blobs.get(stored.sha256)).equals(bytes));
      const shard = dirname(blobs.pathOf(stored.sha256));
      assert.deepEqual(
        readdirSync(shard).filter((name) => name.endsWith(".tmp")),
        [],
      );
    });
  }

  it("takes a digest the caller verified instead of hashing again", async () => {
    const bytes = randomBytes(1000);
    const digest = sha256(bytes);
    assert.equal((await blobs.put(bytes, digest)).sha256, digest);
    assert.ok((await blobs.get(digest)).equals(bytes));
  });

  it("recreates a shard directory that went away after it was first made", async () => {
    const first = randomBytes(64);
    const { sha256: digest } = await blobs.put(first);
    rmSync(dirname(blobs.pathOf(digest)), { recursive: true });
    // Another blob in the same shard: the store remembers the shard, finds it gone, makes it again.
    let sibling = randomBytes(64);
    while (sha256(sibling).slice(0, 2) !== digest.slice(0, 2)) sibling = randomBytes(64);
    const stored = await blobs.put(sibling);
    assert.ok(existsSync(blobs.pathOf(stored.sha256)));
    assert.ok((await blobs.get(stored.sha256)).equals(sibling));
  });

  it("is unchanged by a second put of the same bytes", async () => {
    const bytes = randomBytes(2000);
    const once = await blobs.put(bytes);
    const twice = await blobs.put(bytes);
    assert.deepEqual(twice, once);
    assert.ok((await blobs.get(once.sha256)).equals(bytes));
  });
});
