/**
 * The few fields of an ext4 superblock the target disk needs (target-disk.ts), read and written
 * in place. Before every attempt the disk's reserved-block count is set for the attempt's quota,
 * and after it the usage is read; doing that with `dumpe2fs -h` and `debugfs -w` cost two
 * process starts per attempt (40–100 ms on a loaded host), for one KiB read and rewritten.
 *
 * The superblock is the KiB at byte 1024 of the image (little-endian). With `metadata_csum` its
 * last four bytes are crc32c over the rest, which the kernel checks when it mounts the disk: a
 * rewrite recomputes it, and a read refuses a superblock whose checksum or magic is wrong (a
 * disk torn by a crash), so the caller starts over rather than trusting its figures. Only the
 * primary superblock is written, as `debugfs -w ssv` does: the kernel reads only that one.
 *
 * On an image they run only while no loop device holds it (target-disk.ts `waitUntilDetached`):
 * the kernel writes the superblock itself while the disk is mounted. A mounted disk's superblock
 * is read and written through its loop device instead (kept-target-disk.ts says why that holds).
 */
import { open } from "node:fs/promises";
import { crc32cLe } from "./crc32c.js";

const OFFSET = 1024;
const SIZE = 1024;
const MAGIC = 0xef53;
const INCOMPAT_64BIT = 0x80;
const RO_COMPAT_METADATA_CSUM = 0x400;
/** Byte offsets of the fields used, within the superblock. */
const FIELD = {
  blocksLo: 0x04,
  reservedLo: 0x08,
  freeLo: 0x0c,
  logBlockSize: 0x18,
  magic: 0x38,
  state: 0x3a,
  featureIncompat: 0x60,
  featureRoCompat: 0x64,
  blocksHi: 0x150,
  reservedHi: 0x154,
  freeHi: 0x158,
  checksumType: 0x175,
  overheadClusters: 0x248,
  checksum: 0x3fc,
} as const;

/** What an ext4 superblock says about space, in blocks. */
export interface DiskGeometry {
  readonly blockSize: number;
  readonly blocks: number;
  /** Blocks the file system's own structures take (never the job's). */
  readonly overhead: number;
  readonly free: number;
  readonly reserved: number;
  /** The kernel's "valid" state bit: cleared while mounted read-write, set again by a clean unmount. */
  readonly clean: boolean;
}

/** The superblock is not an intact ext4 superblock (torn, or not ext4 at all). */
export class SuperblockError extends Error {
  override name = "SuperblockError";
}

const has64bit = (sb: Buffer) => (sb.readUInt32LE(FIELD.featureIncompat) & INCOMPAT_64BIT) !== 0;
const hasChecksum = (sb: Buffer) => (sb.readUInt32LE(FIELD.featureRoCompat) & RO_COMPAT_METADATA_CSUM) !== 0;
const checksumOf = (sb: Buffer) => crc32cLe(0xffffffff, sb.subarray(0, FIELD.checksum));

/** A 64-bit count split into lo/hi words (hi only with the 64bit feature). */
function count(sb: Buffer, lo: number, hi: number): number {
  return sb.readUInt32LE(lo) + (has64bit(sb) ? sb.readUInt32LE(hi) * 2 ** 32 : 0);
}

/** Throws SuperblockError unless `sb` is an ext4 superblock whose checksum (if it has one) holds. */
function verify(sb: Buffer, image: string): void {
  if (sb.length < SIZE || sb.readUInt16LE(FIELD.magic) !== MAGIC)
    throw new SuperblockError(`${image} holds no ext4 superblock`);
  if (hasChecksum(sb)) {
    if (sb.readUInt8(FIELD.checksumType) !== 1)
      throw new SuperblockError(`${image}: unknown superblock checksum type ${sb.readUInt8(FIELD.checksumType)}`);
    if (checksumOf(sb) !== sb.readUInt32LE(FIELD.checksum))
      throw new SuperblockError(`${image}: the superblock's checksum does not match its contents`);
  }
}

/** The space figures of a verified superblock. */
export function geometryOf(sb: Buffer, image: string): DiskGeometry {
  verify(sb, image);
  const overhead = sb.readUInt32LE(FIELD.overheadClusters);
  // mkfs.ext4 records it (e2fsprogs 1.46+); the kernel computes it at mount time otherwise.
  if (overhead === 0) throw new SuperblockError(`${image}: the superblock records no overhead count`);
  return {
    blockSize: 1024 * 2 ** sb.readUInt32LE(FIELD.logBlockSize),
    blocks: count(sb, FIELD.blocksLo, FIELD.blocksHi),
    overhead,
    free: count(sb, FIELD.freeLo, FIELD.freeHi),
    reserved: count(sb, FIELD.reservedLo, FIELD.reservedHi),
    clean: (sb.readUInt16LE(FIELD.state) & 1) !== 0,
  };
}

async function readRaw(image: string, flags: "r" | "r+") {
  const handle = await open(image, flags);
  try {
    const sb = Buffer.alloc(SIZE);
    const { bytesRead } = await handle.read(sb, 0, SIZE, OFFSET);
    return { handle, sb: sb.subarray(0, bytesRead) };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** The image's space figures, from its superblock. */
export async function readGeometry(image: string): Promise<DiskGeometry> {
  const { handle, sb } = await readRaw(image, "r");
  await handle.close();
  return geometryOf(sb, image);
}

/**
 * Sets the reserved-block count (no tool enforces "at most half the file system" here, unlike
 * tune2fs) and the checksum, and returns the figures now in force.
 */
export async function writeReservedBlocks(image: string, reserved: number): Promise<DiskGeometry> {
  const { handle, sb } = await readRaw(image, "r+");
  try {
    const before = geometryOf(sb, image);
    if (!Number.isSafeInteger(reserved) || reserved < 0 || reserved > before.blocks)
      throw new RangeError(`a reserve of ${reserved} blocks does not fit ${image}'s ${before.blocks}`);
    if (!has64bit(sb) && reserved >= 2 ** 32) throw new RangeError(`${image} cannot count ${reserved} blocks`);
    sb.writeUInt32LE(reserved % 2 ** 32, FIELD.reservedLo);
    if (has64bit(sb)) sb.writeUInt32LE(Math.floor(reserved / 2 ** 32), FIELD.reservedHi);
    if (hasChecksum(sb)) sb.writeUInt32LE(checksumOf(sb), FIELD.checksum);
    const { bytesWritten } = await handle.write(sb, 0, SIZE, OFFSET);
    if (bytesWritten !== SIZE) throw new Error(`${image}: the superblock was written short (${bytesWritten} bytes)`);
    return { ...before, reserved };
  } finally {
    await handle.close();
  }
}
