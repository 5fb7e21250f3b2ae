/**
 * The per-size disk quota: an attempt's target dir is a file system of its own — an ext4 image
 * (`kiln-target.ext4`) in the host's target directory, loop-mounted only inside the attempt's
 * private mount namespace — and the job may fill exactly its size's quota of it.
 *
 * Why a file system image, not a project quota: a project quota needs the host's volume mounted
 * with prjquota and a kernel built with quota support, which a host may lack (this project's own
 * machine has neither), and nothing else in the path bounds a build script that writes without
 * end. An image works wherever root can loop-mount, bounds the bytes the host disk can receive
 * from one attempt by construction, and travels with the lineage: the lineage store renames the
 * directory holding it, as before, so restoring a warm target stays O(1) whatever its size.
 *
 * How the quota is set without resizing: every image has the same virtual size (sparse, so only
 * written blocks take host disk), and before each attempt the superblock's reserved-block count
 * is set so that what an unprivileged writer may still allocate is the quota less what the
 * lineage already holds. ext4 keeps reserved blocks for root (uid 0 in the initial user
 * namespace, or CAP_SYS_RESOURCE there) and the sandbox user is neither, so its writes fail with
 * ENOSPC at the quota. One image thus serves jobs of every size; a lineage already larger than
 * a smaller size's quota starts over with a fresh image (said in the evidence) rather than fail.
 *
 * Limits of the bound: inode tables are metadata outside the blocks counted, so a job creating
 * millions of empty files can grow the image past the quota by up to its inode tables (256
 * bytes per inode, one inode per 64 KiB: 1/256 of the virtual size); the sandbox's /tmp, and a
 * workspace and home on the memory-backed scratch root, count against the memory limit instead.
 *
 * The sandbox keeps the image mounted between its lineage's attempts (kept-target-disk.ts,
 * `prepareKeptTargetDisk`); everything offline here first unmounts a kept mount and then, since
 * the kernel tears mounts in dead namespaces down asynchronously, `waitUntilDetached` waits until
 * no loop device holds it.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { access, mkdir, open, readdir, readFile, realpath, rm, rmdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { messageOf } from "@kiln/contract";
import type { ExecutionResult } from "../executor.js";
import { type DiskGeometry, readGeometry, SuperblockError, writeReservedBlocks } from "./ext4-superblock.js";
import {
  findKeptMount,
  KEPT_DISK_ROOT,
  type KeptMount,
  liveGeometry,
  mountKept,
  releaseKept,
  releaseKeptDisksUnder,
  setLiveReserve,
} from "./kept-target-disk.js";

export type { DiskGeometry } from "./ext4-superblock.js";

const run = promisify(execFile);

export const TARGET_DISK_FILE = "kiln-target.ext4";

/** Every image's virtual size: twice the largest size's quota (kiln16-cpu, 128 GiB), so that no quota needs a resize. */
export const TARGET_DISK_VIRTUAL_BYTES = 256 * 2 ** 30;

/** One inode per 64 KiB: 4 Mi inodes in 256 GiB (a large cargo target dir holds a few hundred thousand files). */
const BYTES_PER_INODE = 65536;

/** The writable space left below which a finished attempt counts as having filled its quota. */
const FULL_MARGIN_BYTES = 2 * 2 ** 20;

/** The blocks ext4 holds back from every allocation but root's on top of the reserved count (s_resv_clusters). */
function kernelReserve(geometry: DiskGeometry): number {
  return Math.min(Math.floor(geometry.blocks / 50), 4096);
}

/** Bytes of data the file system holds (files, directories), and what an unprivileged writer may still add. */
export function diskUsage(geometry: DiskGeometry): { usedBytes: number; availableBytes: number } {
  const used = geometry.blocks - geometry.overhead - geometry.free;
  const available = Math.max(0, geometry.free - geometry.reserved - kernelReserve(geometry));
  return { usedBytes: used * geometry.blockSize, availableBytes: available * geometry.blockSize };
}

/** The reserved-block count that leaves an unprivileged writer exactly `quotaBytes` in total; null when already over. */
export function reservedBlocksFor(geometry: DiskGeometry, quotaBytes: number): number | null {
  const quotaBlocks = Math.floor(quotaBytes / geometry.blockSize);
  const used = geometry.blocks - geometry.overhead - geometry.free;
  const allowed = quotaBlocks - used;
  if (allowed <= 0) return null;
  return Math.max(0, geometry.free - kernelReserve(geometry) - allowed);
}

/**
 * The e2fsprogs and util-linux tools the disk needs (resolved by the executor's setup): mkfs.ext4
 * once per lineage; its superblock is read and written in place (ext4-superblock.ts).
 */
export interface DiskTools {
  readonly mkfs: string;
  readonly mount: string;
  readonly umount: string;
}

const TOOL_PATH = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"];

async function findTool(name: string): Promise<string> {
  for (const dir of TOOL_PATH) {
    try {
      await access(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // the next directory
    }
  }
  throw new Error(`${name} is not installed (looked in ${TOOL_PATH.join(":")}; Debian packages e2fsprogs, mount)`);
}

let resolvedTools: Promise<DiskTools> | null = null;

/** The tools, found once per process (a failure is retried on the next call). */
export function diskTools(): Promise<DiskTools> {
  resolvedTools ??= (async () => {
    const [mkfs, mount, umount] = await Promise.all(["mkfs.ext4", "mount", "umount"].map(findTool));
    return { mkfs, mount, umount } as DiskTools;
  })();
  resolvedTools.catch(() => {
    resolvedTools = null;
  });
  return resolvedTools;
}

/**
 * The loop devices backing `image`, from sysfs (`/sys/block/loopN/loop/backing_file` exists
 * only while the device is attached, and names its file's current path): no process to start,
 * so the check before and after every attempt costs well under a millisecond.
 */
async function attachedLoopDevices(path: string): Promise<string[]> {
  // sysfs names the file by its resolved path.
  const image = await realpath(path).catch(() => path);
  const devices = (await readdir("/sys/block").catch(() => [] as string[])).filter((d) => d.startsWith("loop"));
  const attached: string[] = [];
  for (const device of devices) {
    try {
      const backing = (await readFile(join("/sys/block", device, "loop", "backing_file"), "utf8")).trim();
      if (backing === image || backing === `${image} (deleted)`) attached.push(device);
    } catch {
      // Not attached (no loop/ directory), or detached while we looked.
    }
  }
  return attached;
}

/**
 * Waits until no loop device holds `image`: a mount in a dead namespace is released by the
 * kernel's deferred work, then its autoclear loop device. Returns false (and leaves it) if it
 * is still held after `timeoutMs` — a kernel that never lets go, not a slow one.
 */
export async function waitUntilDetached(image: string, timeoutMs = 60_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 2; ; delay = Math.min(delay * 2, 100)) {
    if ((await attachedLoopDevices(image)).length === 0) return true;
    if (Date.now() > deadline) return false;
    await sleep(delay);
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** A fresh sparse image whose root belongs to `owner` ("uid:gid"). */
async function makeImage(tools: DiskTools, image: string, owner: string, virtualBytes: number): Promise<void> {
  const handle = await open(image, "wx", 0o600);
  try {
    await handle.truncate(virtualBytes);
  } finally {
    await handle.close();
  }
  await run(tools.mkfs, [
    "-q",
    "-F",
    // No journal: the image lives one attempt at a time and a lineage is discarded whenever its
    // attempt did not end cleanly; lazy inode tables, never zeroed (mounted noinit_itable), so
    // the sparse image only grows by what is written.
    "-O",
    "^has_journal",
    "-E",
    `lazy_itable_init=1,nodiscard,root_owner=${owner}`,
    "-m",
    "0",
    "-i",
    String(BYTES_PER_INODE),
    "-L",
    "kiln-target",
    image,
  ]);
}

export interface PreparedTargetDisk {
  readonly image: string;
  /** Bytes the job may write on top of what the lineage holds. */
  readonly availableBytes: number;
  /** Lines for the evidence. */
  readonly notes: readonly string[];
}

/** "16 GiB", "1.5 GiB", "64 MiB". */
export const gib = (bytes: number) =>
  bytes >= 2 ** 30
    ? `${(bytes / 2 ** 30).toFixed(bytes % 2 ** 30 === 0 ? 0 : 1)} GiB`
    : `${(bytes / 2 ** 20).toFixed(bytes % 2 ** 20 === 0 ? 0 : 1)} MiB`;
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/**
 * Makes `targetDir` hold a target disk whose unprivileged writer may fill `quotaBytes` in all:
 * reuses a warm one (its reserve set for this quota), or makes one. `owner` is the sandbox
 * user ("uid:gid"), who owns the file system's root.
 */
export async function prepareTargetDisk(
  tools: DiskTools,
  targetDir: string,
  quotaBytes: number,
  owner: string,
  /** The image's name in the target dir: the sandbox's, or the microVM's own (microvm/guest-disks.ts says why). */
  fileName = TARGET_DISK_FILE,
): Promise<PreparedTargetDisk> {
  const image = join(targetDir, fileName);
  const notes: string[] = [];
  let fresh = false;
  if (!(await exists(image))) {
    // A target dir from before the disk quota holds cargo's tree itself: a cache, started over.
    const entries = await readdir(targetDir);
    if (entries.length > 0) {
      notes.push(
        `disk: the target dir held ${entries.length} entries outside a target disk (a layout from before the disk quota); it starts empty`,
      );
      // A sandbox's disk a microVM finds here may still be kept mounted: unmounted before it goes.
      await releaseKeptDisksUnder([targetDir]);
      await Promise.all(entries.map((e) => rm(join(targetDir, e), { recursive: true, force: true })));
    }
    fresh = true;
  } else {
    // Kept mounted for the sandbox's attempts (kept-target-disk.ts): handled offline here, so unmounted first.
    await releaseKept(image);
    if (!(await waitUntilDetached(image)))
      throw new Error(`the target disk ${image} is still attached to a loop device from an earlier attempt`);
  }
  const virtualBytes = Math.max(TARGET_DISK_VIRTUAL_BYTES, 2 * quotaBytes);
  if (fresh) await makeImage(tools, image, owner, virtualBytes);
  let geometry: DiskGeometry;
  try {
    geometry = await readGeometry(image);
  } catch (error) {
    // A superblock torn by a crash (or no ext4 at all): the lineage's target is a cache.
    if (fresh || !(error instanceof SuperblockError)) throw error;
    notes.push(`disk: the lineage's target disk is unreadable (${error.message}); it starts empty on a fresh one`);
    await rm(image, { force: true });
    await makeImage(tools, image, owner, virtualBytes);
    fresh = true;
    geometry = await readGeometry(image);
  }
  if (!geometry.clean) {
    // Mounted read-write when its host went down (a kept disk's dirty pages lost with it): a cache, started over.
    notes.push(
      "disk: the lineage's target disk was not cleanly unmounted (its host went down); it starts empty on a fresh one",
    );
    await rm(image, { force: true });
    await makeImage(tools, image, owner, virtualBytes);
    fresh = true;
    geometry = await readGeometry(image);
  }
  let reserved = reservedBlocksFor(geometry, quotaBytes);
  const capacity = (geometry.blocks - geometry.overhead) * geometry.blockSize;
  if (reserved === null || capacity < quotaBytes) {
    const { usedBytes } = diskUsage(geometry);
    notes.push(
      reserved === null
        ? `disk: the lineage's target dir holds ${gib(usedBytes)}, more than this size's ${gib(quotaBytes)} quota; it starts empty on a fresh target disk`
        : `disk: the target disk holds ${gib(capacity)}, less than this size's ${gib(quotaBytes)} quota; it starts empty on a larger one`,
    );
    await rm(image, { force: true });
    await makeImage(tools, image, owner, virtualBytes);
    geometry = await readGeometry(image);
    reserved = reservedBlocksFor(geometry, quotaBytes) ?? 0;
  }
  // Written in place (tune2fs would refuse a reserve above half the file system).
  if (geometry.reserved !== reserved) geometry = await writeReservedBlocks(image, reserved);
  const usage = diskUsage(geometry);
  notes.push(
    `disk: the target dir is a file system of its own (a sparse ext4 image mounted only inside the attempt's isolation), writable up to the size's ${gib(quotaBytes)} quota: ${
      fresh ? "a fresh one" : `the lineage's, holding ${mib(usage.usedBytes)}`
    }, ${mib(usage.availableBytes)} left to write`,
  );
  return { image, availableBytes: usage.availableBytes, notes };
}

export interface PreparedKeptTargetDisk extends PreparedTargetDisk {
  /** The disk's mount in the host's namespace, which the attempt binds. */
  readonly mount: KeptMount;
}

/**
 * `prepareTargetDisk` for a disk kept mounted between attempts (kept-target-disk.ts): adopts
 * the lineage's mount and sets its reserve for this quota online, or prepares the image offline
 * and mounts it.
 */
export async function prepareKeptTargetDisk(
  tools: DiskTools,
  targetDir: string,
  quotaBytes: number,
  owner: string,
  root = KEPT_DISK_ROOT,
): Promise<PreparedKeptTargetDisk> {
  const image = join(targetDir, TARGET_DISK_FILE);
  // Why a kept mount was not adopted, for the evidence (the offline path below then starts over).
  const notAdopted: string[] = [];
  const kept = await findKeptMount(image, root).catch((error) => {
    notAdopted.push(`disk: the lineage's kept mount could not be looked up (${messageOf(error)}); prepared again`);
    return null;
  });
  if (kept !== null) {
    const geometry = await liveGeometry(kept).catch((error) => {
      notAdopted.push(`disk: the kept mount's figures could not be read (${messageOf(error)}); mounted again`);
      return null;
    });
    const reserved = geometry === null ? null : reservedBlocksFor(geometry, quotaBytes);
    const capacity = geometry === null ? 0 : (geometry.blocks - geometry.overhead) * geometry.blockSize;
    // Over this size's quota or smaller than it, or unreadable: the offline path says why and starts over.
    if (geometry !== null && reserved !== null && capacity >= quotaBytes) {
      const live = geometry.reserved === reserved ? geometry : await setLiveReserve(kept, reserved);
      const usage = diskUsage(live);
      return {
        image,
        mount: kept,
        availableBytes: usage.availableBytes,
        notes: [
          `disk: the target dir is a file system of its own (a sparse ext4 image mounted only for the lineage's attempts), writable up to the size's ${gib(quotaBytes)} quota: the lineage's, kept mounted since its last attempt, holding ${mib(usage.usedBytes)}, ${mib(usage.availableBytes)} left to write`,
        ],
      };
    }
  }
  const prepared = await prepareTargetDisk(tools, targetDir, quotaBytes, owner);
  const { mount, ioNote } = await mountKept(image, owner, root);
  return {
    ...prepared,
    mount,
    notes: [
      ...notAdopted,
      ...prepared.notes,
      ioNote,
      "disk: the target disk stays mounted for the lineage's next attempt",
    ],
  };
}

/** After the attempt: what its target disk holds and whether the job filled its quota. */
export async function targetDiskOutcome(
  image: string,
  read: () => Promise<DiskGeometry> = () => readGeometry(image),
): Promise<{ usedBytes: number; availableBytes: number; full: boolean }> {
  const usage = diskUsage(await read());
  return { ...usage, full: usage.availableBytes < FULL_MARGIN_BYTES };
}

/**
 * After the attempt, as both executors report it: what the target disk holds and whether the job
 * filled its quota, said in `detail`; usage that cannot be read is said there too, not thrown.
 */
export async function reportTargetDiskUsage(
  image: string,
  quotaBytes: number,
  detail: string[],
  /** A kept disk's live figures (kept-target-disk.ts); by default the unmounted image's superblock. */
  read?: () => Promise<DiskGeometry>,
): Promise<Pick<ExecutionResult, "diskBytes" | "diskUsedBytes" | "diskQuotaExceeded">> {
  try {
    const after = await targetDiskOutcome(image, read);
    detail.push(
      after.full
        ? `disk: the job filled the ${gib(quotaBytes)} disk quota of its target dir; writes past it failed with ENOSPC (No space left on device)`
        : `disk: the target dir holds ${mib(after.usedBytes)} of its ${gib(quotaBytes)} quota`,
    );
    return { diskBytes: quotaBytes, diskUsedBytes: after.usedBytes, diskQuotaExceeded: after.full };
  } catch (error) {
    detail.push(`disk: the target disk's usage could not be read: ${messageOf(error)}`);
    return { diskBytes: quotaBytes, diskUsedBytes: null, diskQuotaExceeded: false };
  }
}

/**
 * Runs `read` on the target dir's tree as the host sees it: the disk's kept mount (no attempt of
 * the lineage runs while the host reads it), else the target disk mounted read-only
 * (no journal replay, nothing executable) for the duration, or the directory itself when it
 * holds no disk (another executor's). The mount is the agent's own; a crash leaves it for
 * `removeJobDirectories`, which unmounts what lies below what it removes.
 */
export async function withTargetTree<T>(
  targetDir: string,
  read: (tree: string) => Promise<T>,
  keptRoot = KEPT_DISK_ROOT,
): Promise<T> {
  const image = join(targetDir, TARGET_DISK_FILE);
  if (!(await exists(image))) return read(targetDir);
  // Kept mounted for the lineage (kept-target-disk.ts): read in place; no attempt of it runs now.
  const kept = await findKeptMount(image, keptRoot);
  if (kept !== null) return read(join(kept.mountPoint, "target"));
  const tools = await diskTools();
  if (!(await waitUntilDetached(image))) throw new Error(`the target disk ${image} is still attached to a loop device`);
  const view = join(targetDir, `kiln-target.view-${randomBytes(4).toString("hex")}`);
  await mkdir(view, { mode: 0o700 });
  try {
    await run(tools.mount, ["-o", "loop,ro,noload,nosuid,nodev,noexec", image, view]);
    try {
      return await read(join(view, "target"));
    } finally {
      await run(tools.umount, [view]);
    }
  } finally {
    await rmdir(view);
  }
}
