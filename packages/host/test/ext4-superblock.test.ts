import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { readGeometry, SuperblockError, writeReservedBlocks } from "../src/executor/shared/ext4-superblock.js";

const PATH = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" };

/** What e2fsprogs itself reads from the superblock. */
function dumpe2fs(image: string): Record<string, number | boolean> {
  const text = execFileSync("dumpe2fs", ["-h", image], {
    encoding: "utf8",
    env: PATH,
    stdio: ["ignore", "pipe", "ignore"],
  });
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(text)?.[1]);
  return {
    blockSize: field("Block size"),
    blocks: field("Block count"),
    overhead: field("Overhead clusters"),
    free: field("Free blocks"),
    reserved: field("Reserved block count"),
    clean: /^Filesystem state:\s+clean$/m.test(text),
  };
}

describe("ext4 superblock read and written in place", () => {
  let scratch: string;
  let image: string;
  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), "kiln-superblock-"));
    image = join(scratch, "disk.ext4");
    const handle = await open(image, "w");
    await handle.truncate(256 * 2 ** 30);
    await handle.close();
    // As target-disk.ts makes them: 64bit and metadata_csum (mke2fs's ext4 defaults), no journal.
    execFileSync(
      "mkfs.ext4",
      ["-q", "-F", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard", "-m", "0", image],
      {
        env: PATH,
      },
    );
  });
  after(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it("reads the figures dumpe2fs reads", async () => {
    assert.deepEqual({ ...(await readGeometry(image)) }, dumpe2fs(image));
  });

  it("writes a reserve above half the file system, with a checksum e2fsprogs accepts", async () => {
    const before = await readGeometry(image);
    const reserved = before.blocks - 1000;
    const after = await writeReservedBlocks(image, reserved);
    assert.equal(after.reserved, reserved);
    // dumpe2fs refuses a superblock whose checksum does not match (and e2fsck one reserving over half).
    assert.deepEqual(dumpe2fs(image), { ...before, reserved });
    await writeReservedBlocks(image, 12345);
    assert.equal((await readGeometry(image)).reserved, 12345);
    // e2fsck checks the whole file system, superblock checksum included, changing nothing.
    execFileSync("e2fsck", ["-n", "-f", image], { env: PATH, stdio: "ignore" });
  });

  it("refuses a superblock whose checksum does not match, and a file that is no ext4", async () => {
    const torn = join(scratch, "torn.ext4");
    execFileSync("cp", ["--sparse=always", image, torn]);
    const handle = await open(torn, "r+");
    await handle.write(Buffer.from([0x5a]), 0, 1, 1024 + 0x0c); // the free-block count
    await handle.close();
    await assert.rejects(readGeometry(torn), SuperblockError);
    await assert.rejects(writeReservedBlocks(torn, 1), SuperblockError);
    const other = join(scratch, "other");
    const plain = await open(other, "w");
    await plain.write(Buffer.alloc(4096, 1));
    await plain.close();
    await assert.rejects(readGeometry(other), SuperblockError);
  });
});
