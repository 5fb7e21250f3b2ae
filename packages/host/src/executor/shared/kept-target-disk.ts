/**
 * A lineage's target disk (target-disk.ts) kept mounted between the sandbox's attempts: mounted
 * once in the host's mount namespace, under `KEPT_DISK_ROOT` (a root-only tmpfs), and bound into
 * each attempt's namespace. A disk mounted afresh by every attempt starts with ext4's caches
 * cold, which cost a regex edit seconds on a loaded host (docs/benchmarks.md, 2026-11-29 issue
 * 38, pairs (c) and (c′)).
 *
 * The kernel is the registry: a kept mount is found from its image (the loop device whose sysfs
 * `backing_file` names the image's current path, which follows the lineage store's renames) and
 * that device's mount under the root in /proc/self/mountinfo. So an agent that restarts adopts
 * what a previous one left, and nothing here can disagree with what is mounted.
 *
 * The per-attempt quota is set online: the reserved-block count is written into the superblock
 * through the loop device (not the image file), i.e. into the very buffer the mounted ext4 reads
 * it from when it allocates (`ext4_has_free_clusters`) — what `tune2fs -r` does on a mounted
 * device, without tune2fs's "at most half the file system" limit. The usage is read with
 * statfs(2) on the mount, the kernel's live counts (the superblock's free count is stale while
 * mounted). ext4's EXT4_IOC_SET_TUNE_SB_PARAM (Linux 6.17+) would do the same through an ioctl,
 * but caps the reserve at half the blocks too and needs a native call; a remount cannot change
 * the reserve at all. Between attempts the file system is idle (one attempt per lineage at a
 * time), so nothing else rewrites the superblock while it is read and written.
 *
 * What must not see a kept mount: another lineage's attempt — every attempt's launcher unmounts
 * its copy of the whole root (lazily, recursively) right after binding its own disk, and bwrap
 * shows the job only its own binds; the microVM, which attaches its own image file
 * (`kiln-target.microvm.ext4`), never this one; and whatever copies, removes or reads the image
 * offline: `releaseKeptDisksUnder` unmounts the kept disks whose images lie under a directory (or
 * were deleted) and waits until their loop devices are gone, before a lineage is dropped, seeded
 * from, or its attempt directory removed, and when the agent stops.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { chown, mkdir, readFile, realpath, rmdir, statfs } from "node:fs/promises";
import { join, relative } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { type DiskGeometry, readGeometry, writeReservedBlocks } from "./ext4-superblock.js";

const run = promisify(execFile);

/** Where kept target disks are mounted: kiln's runtime state directory, root only. */
export const KEPT_DISK_ROOT = "/run/kiln/target-disks";

export interface KeptMount {
  /** The loop device, `/dev/loopN`. */
  readonly device: string;
  /** Its mount point under the root (the file system's root; cargo's tree is `target/` in it). */
  readonly mountPoint: string;
}

/** The kernel escapes space, tab, newline and backslash in mount paths as octal (`\040`). */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

const isBelow = (dir: string, path: string) => {
  const rel = relative(dir, path);
  return rel !== "" && !rel.startsWith("..") && !rel.startsWith("/");
};

/** Mounts in this namespace: mount point and source, from /proc/self/mountinfo. */
async function mountTable(): Promise<{ point: string; source: string }[]> {
  const table = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  return table.split("\n").flatMap((line) => {
    const [before, after] = line.split(" - ");
    const point = before?.split(" ")[4];
    const source = after?.split(" ")[1];
    return point === undefined || source === undefined ? [] : [{ point: unescapeMountPath(point), source }];
  });
}

/**
 * A loop device's backing file (`deleted` when unlinked), or null when it is not attached. Read
 * synchronously: a sysfs attribute is memory the kernel formats on the spot (a few microseconds),
 * while an asynchronous read costs four thread-pool round trips, and a host keeps a disk mounted
 * for every lineage it holds.
 */
function loopBacking(device: string): { file: string; deleted: boolean } | null {
  try {
    const backing = readFileSync(join("/sys/block", device, "loop", "backing_file"), "utf8").trim();
    const deleted = backing.endsWith(" (deleted)");
    return { file: deleted ? backing.slice(0, -" (deleted)".length) : backing, deleted };
  } catch {
    // Not attached (no loop/ directory), or detached while we looked.
    return null;
  }
}

/**
 * The kept mounts (under `root`) of the loop devices chosen by `pick`. Only the loop devices
 * mounted under the root are looked up in sysfs: a host has many more loop devices (attached
 * or not, a hundred after a test run), and this runs several times per attempt.
 */
async function keptMounts(
  root: string,
  pick: (backing: { file: string; deleted: boolean }) => boolean,
): Promise<(KeptMount & { loop: string })[]> {
  const mounted = (await mountTable()).filter((m) => m.source.startsWith("/dev/loop") && isBelow(root, m.point));
  if (mounted.length === 0) return [];
  const loops = [...new Set(mounted.map((m) => m.source.slice("/dev/".length)))];
  const chosen = new Set(
    loops.filter((loop) => {
      const backing = loopBacking(loop);
      return backing !== null && pick(backing);
    }),
  );
  return mounted.flatMap((m) => {
    const loop = m.source.slice("/dev/".length);
    return chosen.has(loop) ? [{ device: m.source, mountPoint: m.point, loop }] : [];
  });
}

/** The image's kept mount, or null; throws if it has several (never made by this module). */
export async function findKeptMount(image: string, root = KEPT_DISK_ROOT): Promise<KeptMount | null> {
  const path = await realpath(image).catch(() => null);
  if (path === null) return null;
  const found = await keptMounts(root, (b) => !b.deleted && b.file === path);
  if (found.length > 1) throw new Error(`the target disk ${image} is mounted ${found.length} times under ${root}`);
  return found[0] ?? null;
}

/** Makes the root a tmpfs of its own (once per boot, under a lock: agents of one host share it). */
async function ensureRoot(root: string): Promise<void> {
  // Mounted already (every attempt after the host's first): nothing to lock (it is never unmounted).
  if ((await mountTable()).some((m) => m.point === root)) return;
  await mkdir(root, { recursive: true, mode: 0o700 });
  await run("flock", [
    `${root}.lock`,
    "sh",
    "-c",
    'mountpoint -q "$0" || mount -t tmpfs -o mode=0700,size=1m,nosuid,nodev,noexec kiln-target-disks "$0"',
    root,
  ]);
}

/**
 * Mounts `image` (already sized and reserved offline by `prepareTargetDisk`) under the root,
 * switches its loop device to direct I/O, and makes the `target` directory for `owner`. Returns
 * the mount and a line for the evidence about the device's I/O.
 */
export async function mountKept(
  image: string,
  owner: string,
  root = KEPT_DISK_ROOT,
): Promise<{ mount: KeptMount; ioNote: string }> {
  await ensureRoot(root);
  const point = join(root, randomBytes(8).toString("hex"));
  await mkdir(point, { mode: 0o700 });
  try {
    await run("mount", ["-o", "loop,nosuid,nodev,noatime,noinit_itable", image, point]);
  } catch (error) {
    await rmdir(point).catch(() => undefined);
    throw error;
  }
  // The loop device mount attached, from the mount table (as findmnt reads it, without a process).
  const shown = await realpath(point);
  const device = (await mountTable()).findLast((m) => m.point === shown)?.source;
  if (device === undefined) throw new Error(`${image} was mounted at ${point}, which the mount table does not show`);
  // Direct I/O: no second page cache of the image, and the loop device's worker submits
  // asynchronously (docs/benchmarks.md, pair (c″)). A backing file system that refuses O_DIRECT
  // keeps it buffered.
  let ioNote = "disk: the target disk's loop device does direct I/O";
  try {
    await run("losetup", ["--direct-io=on", device]);
  } catch (error) {
    const why = String((error as { stderr?: unknown }).stderr ?? error)
      .replace(/\s+/g, " ")
      .trim();
    ioNote = `disk: the target disk's loop device stays buffered: the host's file system refused direct I/O (${why})`;
  }
  const target = join(point, "target");
  if ((await mkdir(target, { mode: 0o755 }).catch(() => "exists")) !== "exists") {
    const [uid, gid] = owner.split(":").map(Number);
    await chown(target, uid ?? 0, gid ?? 0);
  }
  return { mount: { device, mountPoint: point }, ioNote };
}

/** The superblock as the mounted file system has it, with the kernel's live free count. */
export async function liveGeometry(mount: KeptMount): Promise<DiskGeometry> {
  const [superblock, stats] = await Promise.all([readGeometry(mount.device), statfs(mount.mountPoint)]);
  if (stats.bsize !== superblock.blockSize)
    throw new Error(`${mount.mountPoint}: statfs block size ${stats.bsize} is not the superblock's`);
  return { ...superblock, free: Number(stats.bfree) };
}

/** Sets the reserve of a mounted disk, through its loop device (see the file comment). */
export async function setLiveReserve(mount: KeptMount, reserved: number): Promise<DiskGeometry> {
  await writeReservedBlocks(mount.device, reserved);
  return liveGeometry(mount);
}

/** Unmounts kept disks and waits until their loop devices have let go of the images. */
async function release(mounts: readonly (KeptMount & { loop: string })[], timeoutMs = 60_000): Promise<string[]> {
  const failures: string[] = [];
  for (const m of mounts) {
    try {
      await run("umount", [m.mountPoint]);
      await rmdir(m.mountPoint).catch(() => undefined);
    } catch (error) {
      failures.push(`${m.mountPoint}: ${String((error as { stderr?: unknown }).stderr ?? error).trim()}`);
    }
  }
  // The autoclear device detaches once no mount of the file system is left in any namespace (a
  // launcher that copied the root lets its copy go within milliseconds).
  const deadline = Date.now() + timeoutMs;
  for (let delay = 2; ; delay = Math.min(delay * 2, 100)) {
    const held = mounts.filter((m) => loopBacking(m.loop) !== null);
    if (held.length === 0) return failures;
    if (Date.now() > deadline) return [...failures, ...held.map((m) => `${m.device} is still attached`)];
    await sleep(delay);
  }
}

/** Unmounts the image's kept mount, if any (before it is handled offline). */
export async function releaseKept(image: string, root = KEPT_DISK_ROOT): Promise<void> {
  const path = await realpath(image).catch(() => null);
  if (path === null) return;
  const failures = await release(await keptMounts(root, (b) => !b.deleted && b.file === path));
  if (failures.length > 0) throw new Error(`the kept target disk could not be unmounted: ${failures.join("; ")}`);
}

/**
 * Writes back what the kept disks whose images lie under `dir` still hold in memory (syncfs, as
 * an unmount did), so the images' allocated size on the host is what their file systems hold: a
 * lineage's saved bytes are measured from it (attempt-lineage.ts), and eviction and the tenant's
 * storage quota follow those bytes. Without it a lineage read small until the kernel's writeback.
 */
export async function flushKeptDisksUnder(dir: string, root = KEPT_DISK_ROOT): Promise<void> {
  const resolved = await realpath(dir).catch(() => dir);
  for (const mount of await keptMounts(root, (b) => !b.deleted && isBelow(resolved, b.file))) {
    await run("sync", ["--file-system", mount.mountPoint]);
  }
}

/**
 * Unmounts every kept disk whose image lies under one of `dirs`, or was deleted, and waits
 * until their loop devices are gone: before a directory holding lineages is removed, copied or
 * moved away, and when the agent stops. Throws if one stays mounted.
 */
export async function releaseKeptDisksUnder(dirs: readonly string[], root = KEPT_DISK_ROOT): Promise<void> {
  const resolved = await Promise.all(dirs.map((d) => realpath(d).catch(() => d)));
  const mounts = await keptMounts(root, (b) => b.deleted || resolved.some((d) => isBelow(d, b.file)));
  if (mounts.length === 0) return;
  const failures = await release(mounts);
  if (failures.length > 0) throw new Error(`kept target disks could not be unmounted: ${failures.join("; ")}`);
}
