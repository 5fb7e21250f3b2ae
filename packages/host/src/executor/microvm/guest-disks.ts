/**
 * An attempt's disks and how the host reads what a guest wrote.
 *
 * The guest sees each job directory as a virtio-blk disk: the workspace as an ext4 image made
 * from the host directory (`mkfs.ext4 -d`, unprivileged, no mount), each read-only bind (the
 * dependency gateway's packages) as an erofs image, the target dir as the lineage's own target
 * disk (target-disk.ts; the guest mounts it, the host hands the very file over, no copy).
 *
 * What a guest wrote is untrusted: a job that took the guest kernel could leave a file system
 * crafted to attack whoever mounts it. So the host never mounts a guest-written disk with its own
 * kernel: it reads the workspace back and the artifacts out with e2fsprogs' `debugfs`, a
 * userspace program, run as the unprivileged sandbox user (setpriv, no capabilities, no new
 * privileges), and the target disk's usage from its superblock in Node (ext4-superblock.ts). For
 * the same reason the microVM's target disk has a file name of its own (`MICROVM_TARGET_DISK_FILE`):
 * a lineage a microVM wrote is never loop-mounted by a sandbox on the same data dir (it finds no
 * disk of its kind and starts that lineage empty), while a sandbox-written one a microVM finds is
 * likewise started afresh rather than trusted across the change.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { lstat, mkdir, open, readdir, readFile, rename, rm, rmdir, stat, utimes } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import type { TargetFile } from "../host-isolation.js";
import { patternMatcher } from "../shared/collect-artifacts.js";
import type { SandboxUser } from "../shared/ensure-sandbox-user.js";
import { removeJobDirectories } from "../shared/remove-job-directories.js";

const run = promisify(execFile);

/** The microVM's target disk in a target dir (the sandbox's is `kiln-target.ext4`: see the file comment). */
export const MICROVM_TARGET_DISK_FILE = "kiln-target.microvm.ext4";

/** Most entries of a target tree the host lists for artifacts (a large target holds a few hundred thousand). */
const MAX_LISTED_ENTRIES = 2_000_000;

/**
 * Runs debugfs on `image` as the unprivileged user: no groups, no capabilities, no new
 * privileges. The image is handed over as an open descriptor (/proc/self/fd/3) and the output
 * directory as the working directory, both opened by root, so the user needs no way through the
 * (root-only) directories above them.
 */
async function debugfsAsUser(
  user: SandboxUser,
  image: string,
  args: readonly string[],
  options: { readonly input?: string; readonly cwd?: string } = {},
): Promise<string> {
  const handle = await open(image, "r");
  try {
    const child = spawn(
      "setpriv",
      [
        `--reuid=${user.uid}`,
        `--regid=${user.gid}`,
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
        "debugfs",
        ...args,
        "/proc/self/fd/3",
      ],
      {
        stdio: ["pipe", "pipe", "pipe", handle.fd],
        env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
        ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      },
    );
    return await debugfsFinished(child, options.input ?? "", `debugfs could not read ${image}`);
  } finally {
    await handle.close();
  }
}

/**
 * Feeds a started debugfs its commands and waits for it: what it printed, or an error saying
 * `failure` and its last words. debugfs exits 0 even when it could not open the image; that is
 * found in what it says.
 */
async function debugfsFinished(child: ChildProcess, input: string, failure: string): Promise<string> {
  child.stdin?.on("error", () => undefined);
  child.stdin?.end(input);
  const out: Buffer[] = [];
  let err = "";
  child.stdout?.on("data", (chunk: Buffer) => out.push(chunk));
  child.stderr?.on("data", (chunk: Buffer) => {
    err = (err + chunk.toString("utf8")).slice(-8000);
  });
  const code = await new Promise<number | null>((done, fail) => {
    child.once("error", fail);
    child.once("close", (status) => done(status));
  });
  if (code !== 0 || /while (opening|reading) filesystem|Bad magic number/.test(err))
    throw new Error(`${failure}: ${err.trim().slice(-500) || `exit ${code}`}`);
  return Buffer.concat(out).toString("utf8");
}

/** A debugfs argument: double-quoted; a name holding a quote or a line break cannot be said and is refused. */
function quoted(path: string): string | null {
  return /["\n\r\\]/.test(path) ? null : `"${path}"`;
}

/** Sum of the bytes of regular files under `directory` (the workspace's size, for its disk). */
async function treeBytes(directory: string): Promise<number> {
  const { stdout } = await run("du", ["-s", "--block-size=1", "--apparent-size", directory]);
  return Number(stdout.split(/\s/)[0] ?? 0);
}

/**
 * The workspace as an ext4 image at `image`, owned by the sandbox user and writable by the guest
 * up to `growBytes` beyond what it holds (sparse: only written blocks take host space). The
 * directory is handed to the user first, as the sandbox does, so the image's files are the job's.
 */
export async function makeWorkspaceDisk(
  workspaceDir: string,
  image: string,
  growBytes: number,
  user: SandboxUser,
): Promise<void> {
  await run("chown", ["-R", "--no-dereference", `${user.uid}:${user.gid}`, workspaceDir]);
  const size = Math.ceil((2 * (await treeBytes(workspaceDir)) + growBytes + 64 * 2 ** 20) / 4096) * 4096;
  const handle = await open(image, "wx", 0o600);
  try {
    await handle.truncate(size);
  } finally {
    await handle.close();
  }
  await run("mkfs.ext4", [
    "-q",
    "-F",
    "-O",
    "^has_journal",
    "-E",
    `lazy_itable_init=1,nodiscard,root_owner=${user.uid}:${user.gid}`,
    "-m",
    "0",
    "-L",
    "kiln-workspace",
    "-d",
    workspaceDir,
    image,
  ]);
  // mkfs.ext4 -d copies each file's mtime in whole seconds; cargo compares mtimes exactly, and a
  // truncated one could make a changed file look older than outputs of its old bytes. So each
  // file's nanoseconds are written into its inode (root's debugfs on the image it just made).
  const commands: string[] = [];
  for (const { path, mtimeNs } of await regularFiles(workspaceDir)) {
    const nanoseconds = Number(mtimeNs % NS_PER_SECOND);
    const name = quoted(`/${path}`);
    if (nanoseconds !== 0 && name !== null) commands.push(`set_inode_field ${name} mtime_extra ${nanoseconds * 4}`);
  }
  if (commands.length > 0) await debugfsAsRoot(image, `${commands.join("\n")}\n`);
  await run("chown", [`${user.uid}:${user.gid}`, image]);
}

const NS_PER_SECOND = 1_000_000_000n;

/** Every regular file under `root`, relative and `/`-separated, with its mtime in nanoseconds (no link followed). */
async function regularFiles(root: string): Promise<{ path: string; mtimeNs: bigint }[]> {
  const found: { path: string; mtimeNs: bigint }[] = [];
  const walk = async (relativeDir: string): Promise<void> => {
    for (const entry of await readdir(join(root, relativeDir), { withFileTypes: true })) {
      const path = relativeDir === "" ? entry.name : `${relativeDir}/${entry.name}`;
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) found.push({ path, mtimeNs: (await lstat(join(root, path), { bigint: true })).mtimeNs });
    }
  };
  await walk("");
  return found;
}

/** debugfs writing the image (-w) as root: only on an image the host itself just made, before any guest saw it. */
async function debugfsAsRoot(image: string, input: string): Promise<void> {
  const child = spawn("debugfs", ["-w", "-f", "-", image], { stdio: ["pipe", "ignore", "pipe"] });
  await debugfsFinished(child, input, `debugfs -w could not write ${image}`);
}

/**
 * `debugfs stat` output → each file's mtime as the image holds it: the seconds' low 32 bits, and
 * the extra field's nanoseconds (bits 2–31) and epoch bits (0–1, the seconds beyond 2^32).
 */
function parseMtimes(output: string): Map<string, { seconds: bigint; nanoseconds: bigint }> {
  const mtimes = new Map<string, { seconds: bigint; nanoseconds: bigint }>();
  let current: string | null = null;
  for (const line of output.split("\n")) {
    const command = /^debugfs: stat "\/(.*)"$/.exec(line);
    if (command !== null) {
      current = command[1] ?? null;
      continue;
    }
    const mtime = /^ ?mtime: 0x([0-9a-f]{1,8}):([0-9a-f]{1,8})/.exec(line);
    if (mtime === null || current === null) continue;
    const low = BigInt(`0x${mtime[1]}`);
    const extra = BigInt(`0x${mtime[2]}`);
    // The low word is signed before the epoch bits extend it.
    const signed = low >= 2n ** 31n ? low - 2n ** 32n : low;
    mtimes.set(current, { seconds: signed + ((extra & 3n) << 32n), nanoseconds: extra >> 2n });
    current = null;
  }
  return mtimes;
}

/** The most files whose exact nanoseconds are set one `touch` each; beyond, milliseconds (see readWorkspaceBack). */
const MAX_EXACT_TOUCHES = 256;

/** A read-only erofs image of `directory` at `image`, every file root's (the guest's user reads, never writes it). */
export async function makeReadOnlyDisk(directory: string, image: string): Promise<void> {
  await run("mkfs.erofs", ["--quiet", "--all-root", image, directory]);
}

/**
 * Puts the workspace image's tree back in `workspaceDir` (the agent reads what cargo wrote there:
 * a generated lockfile), read with debugfs as the sandbox user into a fresh directory beside it,
 * then swapped in. Symbolic links come back as links; devices and fifos are not dumped.
 */
export async function readWorkspaceBack(image: string, workspaceDir: string, user: SandboxUser): Promise<void> {
  const back = join(dirname(workspaceDir), `.kiln-workspace-back-${randomBytes(4).toString("hex")}`);
  await mkdir(back, { mode: 0o700 });
  await run("chown", [`${user.uid}:${user.gid}`, back]);
  try {
    // As the user, who cannot change the dumped files' owner (debugfs says so, and goes on).
    await debugfsAsUser(user, image, ["-R", "rdump / ."], { cwd: back });
    await restoreMtimes(image, back, user);
    // mkfs's own directory, not the job's (unless the job's source had one, which it keeps).
    await rmdir(join(back, "lost+found")).catch(() => undefined);
    await removeJobDirectories([workspaceDir]);
    await rename(back, workspaceDir);
  } catch (error) {
    await removeJobDirectories([back]).catch(() => undefined);
    throw error;
  }
}

/**
 * rdump gives each file its mtime in whole seconds; the lineage compares mtimes to the
 * millisecond (source-mtimes.ts) and a generated lockfile to the nanosecond, so each file gets the
 * image's exact mtime back: whole milliseconds (every source file the host materialized) through
 * utimes, other values (what the guest wrote) through `touch` — at most MAX_EXACT_TOUCHES of them,
 * the rest to the millisecond, which only a host without lineages would meet.
 */
async function restoreMtimes(image: string, back: string, user: SandboxUser): Promise<void> {
  const files = await regularFiles(back);
  const stats = files.flatMap(({ path }) => (quoted(`/${path}`) === null ? [] : [`stat ${quoted(`/${path}`)}`]));
  if (stats.length === 0) return;
  const mtimes = parseMtimes(await debugfsAsUser(user, image, ["-f", "-"], { input: `${stats.join("\n")}\n` }));
  let touches = 0;
  for (const { path } of files) {
    const mtime = mtimes.get(path);
    if (mtime === undefined) continue;
    const full = join(back, path);
    if (mtime.nanoseconds % 1_000_000n === 0n || touches >= MAX_EXACT_TOUCHES) {
      const at = new Date(Number(mtime.seconds * 1000n + mtime.nanoseconds / 1_000_000n));
      await utimes(full, at, at);
    } else {
      touches += 1;
      const stamp = `@${mtime.seconds}.${mtime.nanoseconds.toString().padStart(9, "0")}`;
      await run("touch", ["--no-dereference", "--no-create", "-d", stamp, full]);
    }
  }
}

interface TreeEntry {
  readonly path: string;
  readonly directory: boolean;
  readonly regular: boolean;
  /** The owner may execute it (mode 0100): an artifact keeps its execute bit. */
  readonly executable: boolean;
  readonly bytes: number;
}

/** `debugfs -f -` output of `ls -p` commands → the entries of each listed directory, by the directory. */
function parseListings(output: string): Map<string, TreeEntry[]> {
  const listings = new Map<string, TreeEntry[]>();
  let current: TreeEntry[] | null = null;
  let directory = "";
  for (const line of output.split("\n")) {
    const command = /^debugfs: ls -p "(.*)"$/.exec(line);
    if (command !== null) {
      directory = command[1] ?? "";
      current = [];
      listings.set(directory, current);
      continue;
    }
    // /inode/mode/uid/gid/name/size/ — a name never holds a slash.
    const entry = /^\/\d+\/([0-7]+)\/\d+\/\d+\/([^/]*)\/(\d*)\/$/.exec(line);
    if (entry === null || current === null) continue;
    const [, mode = "0", name = "", size = ""] = entry;
    if (name === "." || name === ".." || name === "") continue;
    const type = Number.parseInt(mode, 8) & 0o170000;
    current.push({
      path: directory === "/target" ? name : `${directory.slice("/target/".length)}/${name}`,
      directory: type === 0o040000,
      regular: type === 0o100000,
      executable: (Number.parseInt(mode, 8) & 0o100) !== 0,
      bytes: Number(size || 0),
    });
  }
  return listings;
}

/**
 * Runs `use` on the files of a microVM's target dir (the disk's `/target`) matching the patterns,
 * sorted, at most `limit`: the tree listed a level at a time and the matches dumped to a private
 * directory, all by debugfs as the sandbox user; the dumps are removed afterwards.
 */
export async function withTargetDiskFiles<T>(
  targetDir: string,
  patterns: readonly string[],
  limit: number,
  user: SandboxUser,
  use: (files: readonly TargetFile[]) => Promise<T>,
): Promise<T> {
  const image = join(targetDir, MICROVM_TARGET_DISK_FILE);
  if (
    patterns.length === 0 ||
    !(await stat(image).then(
      () => true,
      () => false,
    ))
  )
    return use([]);
  const matchers = patterns.map(patternMatcher);
  const found: TreeEntry[] = [];
  let level = ["/target"];
  let listed = 0;
  while (level.length > 0 && found.length < limit && listed < MAX_LISTED_ENTRIES) {
    const commands = level.map((d) => `ls -p ${quoted(d)}`).join("\n");
    const listings = parseListings(await debugfsAsUser(user, image, ["-f", "-"], { input: `${commands}\n` }));
    const next: string[] = [];
    for (const entries of listings.values()) {
      for (const entry of entries) {
        listed += 1;
        const path = `/target/${entry.path}`;
        if (entry.directory && quoted(path) !== null) next.push(path);
        else if (entry.regular && matchers.some((m) => m(entry.path))) found.push(entry);
      }
    }
    level = next;
  }
  const chosen = found.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)).slice(0, limit);
  const dumps = join(targetDir, `.kiln-artifacts-${randomBytes(4).toString("hex")}`);
  await mkdir(dumps, { mode: 0o700 });
  await run("chown", [`${user.uid}:${user.gid}`, dumps]);
  try {
    const dumped = chosen.map((entry, index) => ({ entry, file: join(dumps, String(index)) }));
    const commands = dumped.map(({ entry }, index) => `dump ${quoted(`/target/${entry.path}`)} ${index}`);
    if (commands.length > 0)
      await debugfsAsUser(user, image, ["-f", "-"], { input: `${commands.join("\n")}\n`, cwd: dumps });
    return await use(
      dumped.map(({ entry, file }) => ({
        path: entry.path,
        bytes: entry.bytes,
        executable: entry.executable,
        read: () => readFile(file),
      })),
    );
  } finally {
    await rm(dumps, { recursive: true, force: true });
  }
}
