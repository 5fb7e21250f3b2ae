/**
 * What the data dir holds of tenants is readable by no other user of the host (issue 33: a
 * tenant's source was read as uid 65534): blobs, staged parts and the SQLite database with its
 * WAL and shared-memory files are 0600 in 0700 directories, and `nobody` reads none of them,
 * even where the directories above are open to all.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, describe, it } from "node:test";
import { createTenant, LocalBlobStore, openStorage, SQLITE_FILE_NAME, stageBlob } from "../src/index.js";
import { pathsOpenToOthers } from "../src/testing/index.js";

/** `nobody` greps the tree for `secret`: what it could read that holds it. */
function nobodyFinds(root: string, secret: string): string {
  const result = spawnSync("runuser", ["-u", "nobody", "--", "grep", "-rl", secret, root], { encoding: "utf8" });
  return result.stdout;
}

describe("the data dir's files are private", () => {
  // A parent anyone may traverse, as a data dir's often is (./.kiln in a checkout, /var/lib).
  const parent = mkdtempSync(join(tmpdir(), "kiln-private-"));
  chmodSync(parent, 0o755);
  after(() => rmSync(parent, { recursive: true, force: true }));

  it("blobs and staged parts: files 0600, directories 0700, unreadable by nobody", async () => {
    const root = join(parent, "blobs");
    const blobs = new LocalBlobStore(root);
    const secret = `tenant-secret-${randomBytes(8).toString("hex")}`;
    await blobs.put(Buffer.from(`small ${secret}\n`));
    await blobs.put(Buffer.alloc(2 * 1024 * 1024, `large ${secret}\n`));
    const staged = await stageBlob(blobs.stagingDirectory, Readable.from([Buffer.from(`staged ${secret}\n`)]), 1 << 20);
    await blobs.putFile(staged.path, staged.sha256);
    await stageBlob(blobs.stagingDirectory, Readable.from([Buffer.from(`left staged ${secret}\n`)]), 1 << 20);
    assert.deepEqual(pathsOpenToOthers(root), []);
    assert.equal(nobodyFinds(parent, secret), "");
  });

  it("a blob root an earlier version left open is closed at the first write", async () => {
    const root = join(parent, "old-blobs");
    await new LocalBlobStore(root).put(Buffer.from("before"));
    chmodSync(root, 0o755);
    await new LocalBlobStore(root).put(Buffer.from("after"));
    assert.equal(statSync(root).mode & 0o777, 0o700);
  });

  it("the SQLite database, its WAL and shared memory: 0600 in a 0700 data dir, unreadable by nobody", async () => {
    const dataDir = join(parent, "data");
    const storage = await openStorage({ dataDir, databaseUrl: undefined });
    const secret = `tenant-secret-${randomBytes(8).toString("hex")}`;
    try {
      await createTenant(storage, { id: "acme", displayName: secret }, new Date());
      const names = readdirSync(dataDir).sort();
      for (const suffix of ["", "-wal", "-shm"])
        assert.ok(names.includes(`${SQLITE_FILE_NAME}${suffix}`), names.join());
      assert.deepEqual(pathsOpenToOthers(dataDir), []);
      assert.equal(nobodyFinds(parent, secret), "");
    } finally {
      await storage.close();
    }
    // Files an earlier version left readable are made private when the database is opened again.
    for (const suffix of ["", "-wal", "-shm"]) {
      try {
        chmodSync(join(dataDir, `${SQLITE_FILE_NAME}${suffix}`), 0o644);
      } catch {
        // The WAL and shared memory may be gone after a clean close.
      }
    }
    const reopened = await openStorage({ dataDir, databaseUrl: undefined });
    await reopened.close();
    assert.deepEqual(
      pathsOpenToOthers(dataDir).filter((line) => line.includes(SQLITE_FILE_NAME)),
      [],
    );
  });
});
