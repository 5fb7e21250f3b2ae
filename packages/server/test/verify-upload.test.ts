import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { LocalBlobStore } from "@kiln/storage";
import type { SourceManifest } from "../src/domain/sources/manifest-types.js";
import { SegmentDigests } from "../src/domain/sources/segment-digests.js";
import { verifyUpload } from "../src/domain/sources/verify-upload.js";
import { sha256 } from "./source-archives.js";

describe("verifyUpload", () => {
  const root = mkdtempSync(join(tmpdir(), "kiln-verify-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const blobs = new LocalBlobStore(root);
  const pack = Buffer.from("firstsecond");
  const whole = Buffer.from("a file that is a whole part");
  const manifest = (second: string): SourceManifest => ({
    entries: [
      {
        kind: "file",
        path: "a",
        executable: false,
        size: 5,
        sha256: sha256("first"),
        segments: [{ part: 1, offset: 0, length: 5 }],
      },
      {
        kind: "file",
        path: "b",
        executable: false,
        size: 6,
        sha256: second,
        segments: [{ part: 1, offset: 5, length: 6 }],
      },
      {
        kind: "file",
        path: "c",
        executable: false,
        size: whole.length,
        sha256: sha256(whole),
        segments: [{ part: 2, offset: 0, length: whole.length }],
      },
    ],
    parts: [
      { part: 1, sha256: sha256(pack), bytes: pack.length },
      { part: 2, sha256: sha256(whole), bytes: whole.length },
    ],
  });
  const held = new Map([
    [1, { sha256: sha256(pack), bytes: pack.length }],
    [2, { sha256: sha256(whole), bytes: whole.length }],
  ]);

  it("takes packed files' digests from chunk.put and a whole-part file's from its part, reading no blob", async () => {
    // Neither blob exists: any read would fail.
    const segments = new SegmentDigests();
    segments.remember(sha256(pack), pack, [
      [0, 5],
      [5, 6],
    ]);
    assert.deepEqual(await verifyUpload(blobs, manifest(sha256("second")), held, segments), { state: "verified" });
    const lying = await verifyUpload(blobs, manifest(sha256("other")), held, segments);
    assert.equal(lying.state, "rejected");
    assert.equal(lying.state === "rejected" && lying.rejection.path, "b");
  });

  it("hashes the stored bytes when the digests are not at hand", async () => {
    await assert.rejects(verifyUpload(blobs, manifest(sha256("second")), held), /ENOENT/);
    await blobs.put(pack);
    assert.deepEqual(await verifyUpload(blobs, manifest(sha256("second")), held), { state: "verified" });
    const lying = await verifyUpload(blobs, manifest(sha256("other")), held, new SegmentDigests());
    assert.equal(lying.state === "rejected" && lying.rejection.path, "b");
  });

  it("forgets the oldest slices beyond its capacity", () => {
    const segments = new SegmentDigests(2);
    segments.remember(sha256(pack), pack, [
      [0, 1],
      [0, 2],
      [0, 3],
    ]);
    assert.equal(segments.lookup(sha256(pack), 0, 1), undefined);
    assert.equal(segments.lookup(sha256(pack), 0, 3), sha256("fir"));
  });
});
