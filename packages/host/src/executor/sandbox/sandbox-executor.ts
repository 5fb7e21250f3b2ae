/**
 * The `sandbox` executor: one attempt in bubblewrap, as an unprivileged host user, inside a
 * per-attempt cgroup that carries the size's limits and is killed and removed afterwards.
 *
 * How one attempt is launched:
 *
 *   node ─spawn→ setpriv --pdeathsig=KILL     (dies with the agent, keeps root)
 *                └exec→ perl: the output relay (ordered-output.ts): the job's stdout and stderr are
 *                       two datagram sockets on one queue, framed to the agent in write order
 *                       └fork→ unshare --mount --pid --fork --kill-child
 *                              └fork→ bash LAUNCHER  (pid 1 of a fresh pid namespace, private mount namespace)
 *                                     1. closes every file descriptor the agent may have inherited
 *                                     2. writes its own pid into the attempt's cgroup.procs files
 *                                        (from a subshell, while 3. runs), and waits for that to succeed
 *                                     3. mounts a private staging tmpfs and shows the toolchain, the
 *                                        system directories, the read-only binds and the workspace
 *                                        and home there through overlays, and binds the lineage's target
 *                                        disk, kept mounted on the host (kept-target-disk.ts), then drops
 *                                        its copy of every other kept disk
 *                                     └exec→ [prlimit, only for limits no cgroup could apply]
 *                                     └exec→ setpriv: the sandbox user, no groups, no capabilities, no_new_privs
 *                                     └exec→ bwrap: new user/mount/pid/net/ipc/uts/cgroup namespaces,
 *                                            the seccomp filter (seccomp-filter.ts) → the command
 *
 * Why joining the cgroup is race-free: the launcher is moved by pid (its own, written by its
 * own subshell, in its own pid namespace) before anything of the job exists: the job's first
 * process is created only after the subshell has reported success, and every later process
 * (setpriv, bwrap, the sandbox's init, the command and all its descendants) is created from the
 * launcher afterwards and inherits the cgroup, so no part of the attempt ever runs outside it.
 * The pid cannot have been reused: the launcher is alive (the subshell's parent) while it is
 * written. If a write fails the launcher exits before starting anything. (Only `unshare`, which
 * merely waits for its child, the short-lived subshell and the launcher's own mount helpers,
 * which run while the join is in flight, stay outside.)
 *
 * Why the extra pid namespace: its init is the launcher, which becomes bwrap's monitor. When
 * the init of a pid namespace exits, the kernel kills every process in it (nested namespaces
 * included) and the init's exit completes only once all of them are gone; `unshare` reports
 * exit only after that. So when `unshare` has exited, no process of the attempt exists any
 * more — not even the sandbox init bwrap leaves behind as a zombie for the host's pid 1 to
 * reap — and the relay, which waits for that, has read everything the job wrote.
 * `--pdeathsig` (setpriv's, and the relay's own for `unshare`) and `--kill-child` carry the
 * agent's death down the chain (bwrap's --die-with-parent takes it from there), so a crashed
 * agent leaves nothing running.
 *
 * Why the staging mount: bubblewrap resolves bind sources as the unprivileged user, and the
 * toolchain lives under /root (mode 0700) while job directories may sit under root-only
 * directories. Mounting them into a world-searchable tmpfs *inside the private mount namespace*
 * makes them reachable to bwrap without copying them or changing any permission on the host,
 * and the mounts vanish with the attempt — nothing is left mounted on the host.
 *
 * Why overlays rather than plain binds: the sandbox can read /proc/self/mountinfo (Rust's std
 * itself reads it), which names each mount's source and the path of its root within that
 * source's file system. A bind of a host directory would show its host path (the server's data
 * directory, /root/.rustup/…, the scratch root and the attempt's id) and the host's block device.
 * An overlay mount is a file system of its own: mountinfo shows `overlay kiln` with root `/`
 * and the layer paths exactly as given, which the launcher gives relative to the staging
 * directory (`lowerdir=lower/toolchain:empty`). Read-only sources are the lower layer over an
 * empty one; the workspace and home are the upper layer over an empty lower one, so every
 * write lands in the host directory the agent reads afterwards. The target dir is not an
 * overlay: overlayfs writes with its mounter's (root's) credentials, which ext4's reserved
 * blocks let through, so it is a plain bind of the target disk's directory (mountinfo: ext4 on
 * a loop device, root `/target`). docs/isolation.md lists what stays visible.
 *
 * Where the job directories appear inside: at the request's mount points, else at
 * `NEUTRAL_MOUNTS` (/kiln/src, /kiln/target, /kiln/home) — never at their host paths. The
 * agent passes the same fixed ones, so that every attempt of a lineage sees the same paths and
 * cargo's path-hashing fingerprints stay fresh.
 */
import { execFile, spawn } from "node:child_process";
import { constants } from "node:fs";
import { access, lstat, mkdir, readlink, rm, statfs } from "node:fs/promises";
import { release } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import type { Readable } from "node:stream";
import { promisify } from "node:util";
import type { AttemptDiskPolicy, ExecutionOutcome, ExecutionRequest, ExecutionResult, Executor } from "../executor.js";
import { AttemptCgroup, CgroupUnavailableError, type EnforcedLimits } from "../shared/attempt-cgroup.js";
import { beginAttempt } from "../shared/begin-attempt.js";
import { type CgroupLayout, detectCgroupLayout, readOwnCgroups } from "../shared/cgroup-layout.js";
import { commandEnvironment, executorVariables } from "../shared/command-environment.js";
import { ensureSandboxUser, type SandboxUser } from "../shared/ensure-sandbox-user.js";
import { KEPT_DISK_ROOT, type KeptMount, liveGeometry } from "../shared/kept-target-disk.js";
import { killLauncher } from "../shared/kill-launcher.js";
import { OutputFrames } from "../shared/output-frames.js";
import { mountPointsOf } from "../shared/request-problem.js";
import { type DiskTools, diskTools, prepareKeptTargetDisk, reportTargetDiskUsage } from "../shared/target-disk.js";
import { HIDDEN_SYSTEM_DIRECTORIES, writeSandboxLoaderCache } from "./loader-cache.js";
import { OUTPUT_RELAY } from "./ordered-output.js";
import { rlimitFallback } from "./rlimit-fallback.js";
import { sandboxSeccompProgram } from "./seccomp-filter.js";

const run = promisify(execFile);

export interface SandboxExecutorOptions {
  /** Default /usr/bin/bwrap. */
  readonly bwrapPath?: string;
  /** The unprivileged host user sandboxes run as; created if absent. Default "kiln-sandbox". */
  readonly sandboxUser?: string;
  /** The cgroup grouping all attempts. Default "kiln". */
  readonly cgroupParentName?: string;
  /** An empty directory the private staging tmpfs is mounted on (in the attempt's own mount namespace). */
  readonly stagingDirectory?: string;
  /** Where lineages' target disks stay mounted between attempts (kept-target-disk.ts). Default /run/kiln/target-disks. */
  readonly keptDiskRoot?: string;
  /** Where the toolchain appears inside the sandbox. Default /opt/kiln/toolchain. */
  readonly toolchainMountPoint?: string;
  /** Overrides detection; `NO_CGROUPS` forces the rlimit fallback. */
  readonly cgroupLayout?: CgroupLayout;
  /**
   * The largest disk quota this host grants one attempt (a host whose volume is small, or a
   * test that fills the quota): a size's larger quota is lowered to it, and the evidence says so.
   */
  readonly maxDiskBytes?: number;
}

export const SANDBOX_DEFAULTS = {
  bwrapPath: "/usr/bin/bwrap",
  sandboxUser: "kiln-sandbox",
  cgroupParentName: "kiln",
  stagingDirectory: "/run/kiln/sandbox-stage",
  keptDiskRoot: KEPT_DISK_ROOT,
  toolchainMountPoint: "/opt/kiln/toolchain",
};

/** The PATH the launcher itself (root, outside the sandbox) uses to find mount, setpriv, prlimit. */
const LAUNCHER_PATH = "/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * `bash -c LAUNCHER kiln-launch STAGE CACHE PROCS… -- FSTAB OWNER -- PASSWD GROUP HOSTS COMMAND…`
 * Runs as root, as pid 1 of a fresh pid namespace in a private mount namespace; see the file
 * comment. In the staging tmpfs (its working directory from then on, so that the overlays'
 * layer paths are relative and name nothing of the host) it mounts every line of FSTAB with
 * one `mount --all`, which makes each mount point as it goes (see `staging`: an empty read-only
 * tmpfs, the read-only sources and the writable workspace and home through overlays, the target
 * disk at `disk`), makes the
 * disk's `target` directory for OWNER on first use, writes the identity files and `void` (what
 * masks /proc entries), and opens the loader cache CACHE (loader-cache.ts) as descriptor 6 for bwrap to copy. Every
 * external command costs a fork and an exec, which on a loaded host is where the launcher's
 * time goes (two mount commands per overlay cost more than the mounts themselves).
 * bash rather than sh because closing descriptors above 9 needs it (dash only redirects 0–9):
 * bwrap hands every open descriptor to the command, so anything the agent inherited without
 * close-on-exec would otherwise reach the sandbox. Descriptor 5 is the seccomp program; bwrap
 * closes 5 and 6 once it has read them.
 */
const LAUNCHER = [
  "set -eu",
  "stage=$1; cache=$2; kept=$3; shift 3",
  'procs=(); while [ "$1" != "--" ]; do procs+=("$1"); shift; done; shift',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a JavaScript template
  'for fd in /proc/self/fd/*; do fd=${fd##*/}; if [ "$fd" -gt 5 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi; done',
  // The cgroup join, by a subshell writing the launcher's pid, overlaps the mounts: the first
  // write to a cgroup.procs file waits for an RCU grace period (tens of ms on a loaded host).
  // The mount commands are the launcher's helpers, not the job's; nothing of the job starts
  // before the join has succeeded (the `wait` below).
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a JavaScript template
  'launcher=$$; (for p in "${procs[@]}"; do echo "$launcher" > "$p" || exit 121; done) & joining=$!',
  'mount -t tmpfs -o mode=0755,size=4m,nosuid,nodev,noexec kiln-stage "$stage"',
  'cd "$stage"',
  'printf "%s" "$1" > fstab',
  "mount --all --fstab fstab",
  // This namespace's copy of every lineage's kept target disk (kept-target-disk.ts) goes, now that
  // its own is bound at `disk`: the job never sees them (bwrap shows only its binds), and a copy
  // left here would hold another lineage's disk mounted until this attempt ends. (Not mounted:
  // no disk is kept on this host yet, nothing to drop.)
  'umount --recursive --lazy "$kept" 2>/dev/null || true',
  'if [ ! -d disk/target ]; then mkdir disk/target; chown "$2" disk/target; fi',
  'wait "$joining" || exit 121',
  'shift 2; [ "$1" = "--" ]; shift',
  'for f in passwd group hosts; do printf "%s" "$1" > "$f"; shift; done',
  'if [ -r "$cache" ]; then exec 6<"$cache"; else exec 6</dev/null; fi',
  ": > void",
  // From here on stderr is the job's (fd 4); the launcher's own stderr stays a diagnostics channel.
  // With an empty environment (-c): bubblewrap's pid 1 inside keeps the environment bwrap was
  // started with (the sandbox reads it in /proc/1/environ), and the launcher's names the agent's
  // working directory (OLDPWD). The job's own comes from bwrap's --clearenv and --setenv.
  'exec -c "$@" 2>&4 4>&-',
].join("\n");

/** A field of an fstab line: libmount reads `\ooo` octal escapes, so blanks, `#` and `\` are written as those. */
function fstabField(value: string): string {
  return value.replace(/[ \t\n\r\v\f#\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`);
}

/**
 * /proc entries masked with an empty file or directory: they describe the host rather than the
 * sandbox (its kernel command line and root device, every block device and its I/O, swap,
 * other processes' scheduling, the file systems' per-device state). Docker masks the same kind.
 */
const MASKED_PROC_FILES = [
  "/proc/cmdline",
  "/proc/partitions",
  "/proc/diskstats",
  "/proc/swaps",
  "/proc/sched_debug",
  "/proc/timer_list",
  "/proc/kcore",
  "/proc/keys",
];
const MASKED_PROC_DIRECTORIES = ["/proc/fs", "/proc/scsi", "/proc/driver", "/proc/acpi"];

/** Host system directories the toolchain needs, read-only at their own paths (or recreated as the same symlinks). */
const SYSTEM_PATHS = ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/alternatives"];

/** How one system path appears: the same symlink, or the directory through a read-only overlay staged as `name`. */
type SystemPath =
  | { readonly kind: "symlink"; readonly path: string; readonly target: string }
  | { readonly kind: "directory"; readonly path: string; readonly name: string };

interface Setup {
  readonly user: SandboxUser;
  readonly tools: {
    readonly unshare: string;
    readonly setpriv: string;
    readonly prlimit: string;
    readonly bash: string;
    readonly chown: string;
    /** Runs the output relay (ordered-output.ts); Debian's perl-base is Essential. */
    readonly perl: string;
  };
  readonly bwrapVersion: string;
  readonly supportsDisableUserns: boolean;
  readonly supportsTmpfsSize: boolean;
  /** overlayfs's `volatile` (Linux 5.10+): see `staging`. */
  readonly supportsVolatileOverlay: boolean;
  readonly systemPaths: readonly SystemPath[];
  /** Directories inside the shown system paths that show empty (HIDDEN_SYSTEM_DIRECTORIES present here). */
  readonly hiddenDirectories: readonly string[];
  /** The loader cache the sandbox is given (loader-cache.ts), or null for none. */
  readonly loaderCache: string | null;
  /** The masked /proc entries this kernel has (bwrap cannot make a mount point in procfs). */
  readonly maskedProc: readonly { readonly path: string; readonly directory: boolean }[];
  /** The compiled seccomp filter bubblewrap loads (seccomp-filter.ts). */
  readonly seccomp: ReturnType<typeof sandboxSeccompProgram>;
  readonly disk: DiskTools;
  readonly layout: CgroupLayout;
  readonly ownCgroups: ReadonlyMap<string, string>;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function findTool(name: string): Promise<string> {
  for (const dir of LAUNCHER_PATH.split(":")) {
    const path = join(dir, name);
    try {
      await access(path, constants.X_OK);
      return path;
    } catch {
      // try the next directory
    }
  }
  throw new Error(`${name} is not installed (looked in ${LAUNCHER_PATH})`);
}

function versionAtLeast(version: string, major: number, minor: number): boolean {
  const [a, b] = version.split(".").map(Number);
  return (a ?? 0) > major || ((a ?? 0) === major && (b ?? 0) >= minor);
}

/** The host's system directories as the sandbox shows them, mirroring symlinks (merged /usr). */
async function systemPaths(): Promise<SystemPath[]> {
  const found: SystemPath[] = [];
  for (const path of SYSTEM_PATHS) {
    try {
      const stats = await lstat(path);
      if (stats.isSymbolicLink()) found.push({ kind: "symlink", path, target: await readlink(path) });
      else if (stats.isDirectory()) found.push({ kind: "directory", path, name: `system${path.replaceAll("/", "-")}` });
    } catch {
      // Absent on this distribution (e.g. no /lib64): nothing to show.
    }
  }
  return found;
}

/** The masked /proc entries present here (the sandbox's procfs has the host's kernel's entries). */
async function maskedProcEntries(): Promise<{ path: string; directory: boolean }[]> {
  const found: { path: string; directory: boolean }[] = [];
  for (const [paths, directory] of [
    [MASKED_PROC_FILES, false],
    [MASKED_PROC_DIRECTORIES, true],
  ] as const)
    for (const path of paths) {
      try {
        if ((await lstat(path)).isDirectory() === directory) found.push({ path, directory });
      } catch {
        // Not in this kernel: nothing to mask.
      }
    }
  return found;
}

/** statfs f_type of tmpfs. */
const TMPFS_MAGIC = 0x01021994;

/** The empty work directory an overlay over the writable `directory` needs, beside it (same file system). */
function overlayWorkDirectory(directory: string): string {
  return join(dirname(directory), `.kiln-overlay-${basename(directory)}`);
}

/**
 * What bounds the workspace and home, which are not on the target disk: on tmpfs (the agent's
 * memory-backed scratch root) their pages are charged to the attempt's memory cgroup, so the
 * memory limit bounds them; on a disk nothing does, and the evidence says so.
 */
async function scratchNote(request: ExecutionRequest): Promise<string> {
  const onTmpfs = async (path: string) => (await statfs(path)).type === TMPFS_MAGIC;
  const [workspace, home] = await Promise.all([onTmpfs(request.workspaceDir), onTmpfs(request.homeDir)]);
  return workspace && home
    ? "disk: the workspace and home are memory-backed (tmpfs): what the job writes there counts against its memory limit"
    : "disk: the workspace or home is on a disk, outside the quota (set the host's scratch root on tmpfs to bound it)";
}

/** "16 GiB", "1.5 GiB", "64 MiB". */
const gib = (bytes: number) =>
  bytes >= 2 ** 30
    ? `${(bytes / 2 ** 30).toFixed(bytes % 2 ** 30 === 0 ? 0 : 1)} GiB`
    : `${(bytes / 2 ** 20).toFixed(bytes % 2 ** 20 === 0 ? 0 : 1)} MiB`;

class SandboxExecutor implements Executor {
  readonly isolation = "sandbox" as const;
  readonly disk: AttemptDiskPolicy;
  private setupPromise: Promise<Setup> | null = null;
  private readonly options: typeof SANDBOX_DEFAULTS & {
    readonly cgroupLayout?: CgroupLayout;
    readonly maxDiskBytes?: number;
  };

  constructor(options: SandboxExecutorOptions) {
    this.options = { ...SANDBOX_DEFAULTS, ...options };
    this.disk = { maxAttemptBytes: options.maxDiskBytes ?? null };
  }

  /** Once per executor: tools present, sandbox user exists, staging directory exists, cgroups detected. */
  private setup(): Promise<Setup> {
    this.setupPromise ??= this.performSetup();
    // A failed setup is retried on the next attempt (the operator may have fixed the machine).
    this.setupPromise.catch(() => {
      this.setupPromise = null;
    });
    return this.setupPromise;
  }

  private async performSetup(): Promise<Setup> {
    if (process.getuid?.() !== 0)
      throw new Error("the sandbox executor must run as root (it drops to the sandbox user itself)");
    await access(this.options.bwrapPath, constants.X_OK).catch(() => {
      throw new Error(`bubblewrap is not installed at ${this.options.bwrapPath} (Debian package "bubblewrap")`);
    });
    const { stdout } = await run(this.options.bwrapPath, ["--version"]);
    const bwrapVersion = /(\d+\.\d+(?:\.\d+)?)/.exec(stdout)?.[1] ?? "unknown";
    const [unshare, setpriv, prlimit, bash, chown, perl, ldconfig, user] = await Promise.all([
      findTool("unshare"),
      findTool("setpriv"),
      findTool("prlimit"),
      findTool("bash"),
      findTool("chown"),
      findTool("perl"),
      // No ldconfig (a distribution without glibc's loader cache): the sandbox gets no cache.
      findTool("ldconfig").catch(() => null),
      ensureSandboxUser(this.options.sandboxUser),
    ]);
    await mkdir(this.options.stagingDirectory, { recursive: true, mode: 0o755 });
    const loaderCache =
      ldconfig === null
        ? null
        : await writeSandboxLoaderCache(ldconfig, join(dirname(this.options.stagingDirectory), "sandbox-ld.so.cache"));
    const hiddenDirectories: string[] = [];
    for (const path of HIDDEN_SYSTEM_DIRECTORIES) {
      if ((await lstat(path).catch(() => null))?.isDirectory()) hiddenDirectories.push(path);
    }
    // Throws on an architecture with no filter: no job runs unfiltered.
    const seccomp = sandboxSeccompProgram();
    return {
      seccomp,
      disk: await diskTools(),
      user,
      tools: { unshare, setpriv, prlimit, bash, chown, perl },
      bwrapVersion,
      supportsDisableUserns: versionAtLeast(bwrapVersion, 0, 8),
      supportsTmpfsSize: versionAtLeast(bwrapVersion, 0, 7),
      supportsVolatileOverlay: versionAtLeast(release(), 5, 10),
      systemPaths: await systemPaths(),
      hiddenDirectories,
      loaderCache,
      maskedProc: await maskedProcEntries(),
      layout: this.options.cgroupLayout ?? (await detectCgroupLayout()),
      ownCgroups: await readOwnCgroups(),
    };
  }

  async run(request: ExecutionRequest): Promise<ExecutionResult> {
    const begun = await beginAttempt("sandbox", request, () => this.setup(), [
      this.options.toolchainMountPoint,
      this.options.stagingDirectory,
    ]);
    if ("refused" in begun) return begun.refused;
    const { result, detail, setup } = begun;
    detail.push(
      `isolation: sandbox — bubblewrap ${setup.bwrapVersion}; new user, mount, pid, network (loopback only), ipc, uts and cgroup namespaces${
        setup.supportsDisableUserns ? "; further user namespaces disabled inside" : ""
      }; host uid ${setup.user.uid} (${setup.user.name}), gid ${setup.user.gid}, no capabilities`,
      `seccomp: bubblewrap loads a ${setup.seccomp.instructions}-instruction filter into the command before it runs (it starts nothing if the kernel refuses it): ${setup.seccomp.denied} system calls answer EPERM, clone with a namespace flag EPERM, clone3 ENOSYS, personality only its ordinary values, other ABIs are killed`,
      `mounts: the job's directories at ${Object.values(mountPointsOf(request)).join(", ")}, the system and toolchain through overlays; /proc/self/mountinfo names no host path`,
      `toolchain: ${request.toolchain.name} from ${request.toolchain.path}, read-only at ${this.options.toolchainMountPoint}`,
    );

    // Three independent preparations, side by side (each is file system or cgroupfs work, and on a
    // loaded host every wait counts): the job directories handed over, the target disk sized,
    // the cgroup made. Their outcomes are read in this order, so the evidence reads the same.
    const quotaBytes = Math.min(request.limits.diskBytes, this.options.maxDiskBytes ?? Number.POSITIVE_INFINITY);
    const [handedOver, preparedDisk, createdCgroup] = await Promise.allSettled([
      this.handOver(request, setup),
      (async () => {
        const disk = await prepareKeptTargetDisk(
          setup.disk,
          request.targetDir,
          quotaBytes,
          `${setup.user.uid}:${setup.user.gid}`,
          this.options.keptDiskRoot,
        );
        return { disk, scratch: await scratchNote(request) };
      })(),
      AttemptCgroup.create({
        layout: setup.layout,
        ownCgroups: setup.ownCgroups,
        parentName: this.options.cgroupParentName,
        attemptId: request.attemptId,
        limits: request.limits,
      }),
    ]);
    const cgroup: AttemptCgroup | null = createdCgroup.status === "fulfilled" ? createdCgroup.value : null;
    const failed = async (line: string): Promise<ExecutionResult> => {
      detail.push(line);
      if (cgroup !== null) await cgroup.remove();
      await this.removeOverlayWork(request);
      return result("infrastructure");
    };
    if (handedOver.status === "rejected")
      return failed(`could not hand the job directories to ${setup.user.name}: ${errorText(handedOver.reason)}`);
    if (preparedDisk.status === "rejected")
      return failed(`disk: the target disk could not be prepared: ${errorText(preparedDisk.reason)}`);
    const { disk } = preparedDisk.value;
    if (quotaBytes < request.limits.diskBytes)
      detail.push(
        `disk: this host grants at most ${gib(quotaBytes)} per attempt, below the size's ${gib(request.limits.diskBytes)}`,
      );
    detail.push(...disk.notes, preparedDisk.value.scratch);
    if (createdCgroup.status === "fulfilled") detail.push(...createdCgroup.value.detail);
    else if (createdCgroup.reason instanceof CgroupUnavailableError)
      detail.push(`cgroups unavailable: ${createdCgroup.reason.message}; limits fall back to rlimits`);
    else return failed(`cgroup setup failed: ${errorText(createdCgroup.reason)}`);

    try {
      if (request.signal.aborted) {
        detail.push("cancelled before the sandbox started");
        return result("cancelled");
      }
      const launched = await this.launch(request, setup, cgroup, detail, result, disk.mount);
      return {
        ...launched,
        ...(await reportTargetDiskUsage(disk.image, quotaBytes, detail, () => liveGeometry(disk.mount))),
      };
    } finally {
      if (cgroup !== null) {
        // Normally already done by launch(); this covers an exception thrown half-way.
        await cgroup.killAll();
        await cgroup.remove();
      }
      await this.removeOverlayWork(request);
    }
  }

  /**
   * The workspace and home become the sandbox user's (the only writable places besides the
   * target disk, whose root it owns already), each with the empty work directory its overlay
   * needs beside it, made afresh.
   */
  private async handOver(request: ExecutionRequest, setup: Setup): Promise<void> {
    const owner = `${setup.user.uid}:${setup.user.gid}`;
    // -R without -L never follows a symlink the job planted; --no-dereference changes links themselves.
    await run(setup.tools.chown, ["-R", "--no-dereference", owner, request.workspaceDir, request.homeDir]);
    for (const directory of [request.workspaceDir, request.homeDir]) {
      const work = overlayWorkDirectory(directory);
      await rm(work, { recursive: true, force: true });
      await mkdir(work, { mode: 0o700 });
    }
  }

  private async removeOverlayWork(request: ExecutionRequest): Promise<void> {
    for (const directory of [request.workspaceDir, request.homeDir])
      await rm(overlayWorkDirectory(directory), { recursive: true, force: true }).catch(() => undefined);
  }

  private async launch(
    request: ExecutionRequest,
    setup: Setup,
    cgroup: AttemptCgroup | null,
    detail: string[],
    result: (outcome: ExecutionOutcome, rest?: Partial<ExecutionResult>) => ExecutionResult,
    disk: KeptMount,
  ): Promise<ExecutionResult> {
    const noCgroupLimits: EnforcedLimits = { cpu: false, memory: false, pids: false };
    const fallback = rlimitFallback(request.limits, cgroup?.enforced ?? noCgroupLimits);
    detail.push(...fallback.detail);
    if (cgroup !== null)
      detail.push(
        `placement: the launcher wrote its own pid to ${cgroup.procsFiles.length} cgroup.procs file(s) before starting anything`,
      );

    const staging = this.staging(request, setup, disk);
    const command = [
      setup.tools.bash,
      "-c",
      LAUNCHER,
      "kiln-launch",
      this.options.stagingDirectory,
      setup.loaderCache ?? "/dev/null",
      this.options.keptDiskRoot,
      ...(cgroup?.procsFiles ?? []),
      "--",
      staging.fstab,
      `${setup.user.uid}:${setup.user.gid}`,
      "--",
      ...this.identityFiles(request, setup.user),
      ...(fallback.prlimitOptions.length > 0 ? [setup.tools.prlimit, ...fallback.prlimitOptions, "--"] : []),
      setup.tools.setpriv,
      `--reuid=${setup.user.uid}`,
      `--regid=${setup.user.gid}`,
      "--clear-groups",
      "--no-new-privs",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--",
      this.options.bwrapPath,
      ...this.bwrapArguments(request, setup, detail),
      "--",
      ...request.argv,
    ];

    const child = spawn(
      setup.tools.setpriv,
      [
        "--pdeathsig=KILL",
        "--",
        setup.tools.perl,
        "-e",
        OUTPUT_RELAY,
        "--",
        setup.tools.unshare,
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child=KILL",
        "--mount-proc",
        "--",
        ...command,
      ],
      {
        // 0 nothing, 1 the relay's frames (the job's stdout and stderr in write order), 2 the
        // launcher's diagnostics, 3 bwrap's status, 4 none (the relay puts the job's stderr
        // there), 5 the seccomp program (bwrap reads it to its end).
        stdio: ["ignore", "pipe", "pipe", "pipe", "ignore", "pipe"],
        env: { PATH: LAUNCHER_PATH },
      },
    );
    const seccompPipe = (child.stdio as unknown as (NodeJS.WritableStream | null)[])[5] ?? null;
    seccompPipe?.on("error", () => undefined); // a launcher that died early closed it; its exit says why
    seccompPipe?.end(setup.seccomp.bytes);
    let status = "";
    let stderrTail = "";
    let diagnostics = "";
    const emit = (stream: "stdout" | "stderr", chunk: Buffer) => {
      try {
        request.onOutput(stream, chunk);
      } catch {
        // A failing consumer must not break the attempt's bookkeeping.
      }
    };
    const frames = new OutputFrames((stream, chunk) => {
      emit(stream, chunk);
      if (stream === "stderr") stderrTail = (stderrTail + chunk.toString("utf8")).slice(-2000);
    });
    child.stdout?.on("data", (chunk: Buffer) => {
      try {
        frames.push(chunk);
      } catch (error) {
        diagnostics = `${diagnostics}${errorText(error)}\n`.slice(-2000);
        child.stdout?.destroy();
      }
    });
    // Setup errors of the launcher, and unshare's own remarks when its child is killed (not the job's output).
    child.stderr?.on("data", (chunk: Buffer) => {
      diagnostics = (diagnostics + chunk.toString("utf8")).slice(-2000);
    });
    (child.stdio[3] as Readable | null)?.on("data", (chunk: Buffer) => {
      status += chunk.toString("utf8");
    });
    const closed = new Promise<void>((resolveClosed) => child.once("close", () => resolveClosed()));

    let ending: "wall_clock_ceiling" | "cancelled" | null = null;
    const killEverything = async (): Promise<void> => {
      // The output relay stands between the spawned process and unshare (ordered-output.ts).
      await killLauncher(child, 1);
      // The backstop for anything that left the namespace; without a cgroup, the launcher's end is enough.
      if (cgroup !== null) await cgroup.killAll();
    };
    const end = (reason: "wall_clock_ceiling" | "cancelled") => {
      if (ending !== null) return;
      ending = reason;
      detail.push(
        reason === "cancelled"
          ? "cancelled: every process of the attempt was killed"
          : `wall-clock ceiling of ${request.wallClockSeconds} s reached: every process of the attempt was killed`,
      );
      killEverything().catch((error: unknown) => detail.push(`killing the attempt failed: ${errorText(error)}`));
    };
    const timer = setTimeout(() => end("wall_clock_ceiling"), request.wallClockSeconds * 1000);
    const onAbort = () => end("cancelled");
    request.signal.addEventListener("abort", onAbort, { once: true });
    // An abort that landed while the launcher was being spawned would otherwise go unnoticed.
    if (request.signal.aborted) onAbort();

    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((done) => {
      child.once("exit", (code, signal) => done({ code, signal }));
      child.once("error", (error) => done({ code: null, signal: null, error }));
    });
    clearTimeout(timer);
    request.signal.removeEventListener("abort", onAbort);

    // The pid namespace is gone once the launcher has exited; the cgroup is checked (and killed) as a backstop.
    let emptied = true;
    if (cgroup !== null) emptied = await cgroup.killAll();
    // The streams close once the last holder of the pipes is gone, which the kill above ensures;
    // the bound only guards against a kernel that keeps a killed process around unusually long.
    const closedInTime =
      exit.error === undefined &&
      (await Promise.race([
        closed.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 5000).unref()),
      ]));
    if (!closedInTime) for (const stream of child.stdio) stream?.destroy();
    const cutOff = frames.end();
    if (cutOff > 0) detail.push(`output: the relay ended in the middle of a write; its last ${cutOff} bytes are lost`);
    const usage = cgroup !== null ? await cgroup.usage() : null;
    if (cgroup !== null) {
      const failures = await cgroup.remove();
      detail.push(
        emptied && failures.length === 0
          ? "cleanup: no process of the attempt remains; its cgroup was removed"
          : `cleanup incomplete: ${emptied ? "" : "processes remained after SIGKILL; "}${failures.join("; ")}`,
      );
    }

    const measured: Partial<ExecutionResult> = {
      oomKilled: usage?.oomKilled ?? false,
      cpuSeconds: usage?.cpuSeconds ?? null,
      peakMemoryBytes: usage?.peakMemoryBytes ?? null,
    };
    if (usage?.oomKilled) detail.push("memory: the kernel OOM-killed a process at the attempt's memory limit");
    if ((usage?.pidsRefused ?? 0) > 0)
      detail.push(
        `pids: the kernel refused ${usage?.pidsRefused} forks at the attempt's limit of ${request.limits.pids} processes${
          usage?.pidsPeak === null || usage?.pidsPeak === undefined ? "" : ` (at most ${usage.pidsPeak} at once)`
        }`,
      );
    if (exit.error !== undefined) {
      detail.push(`could not start the launcher: ${exit.error.message}`);
      return result("infrastructure", measured);
    }
    if (ending !== null) return result(ending, { ...measured, signal: exit.signal ?? "SIGKILL" });
    // bwrap reports the command's exit code on the status fd only once it really exec'd the
    // command; without that line the failure was the sandbox's (setup or exec), not the job's.
    const exitCode = /"exit-code"\s*:\s*(-?\d+)/.exec(status)?.[1];
    if (exitCode === undefined) {
      const why = [diagnostics.trim(), stderrTail.trim()].filter((t) => t !== "").join(" / ");
      detail.push(`the sandbox did not start the command: ${why || `launcher exit ${exit.code}`}`);
      return result("infrastructure", measured);
    }
    return result("exited", { ...measured, exitCode: Number(exitCode) });
  }

  /**
   * The fstab the launcher mounts, in order, each mount point made as it goes (libmount's
   * X-mount.mkdir, so no mkdir command): `empty`, an empty read-only tmpfs (the lower layer of
   * the writable overlays, the upper one of the read-only ones, and what masks /proc
   * directories); a read-only source bound at lower/NAME and shown at NAME through a read-only
   * overlay; a writable directory's parent bound at upper/NAME, and NAME an overlay whose upper
   * layer is the directory (its work directory beside it, on the same file system); the target
   * disk at `disk`.
   *
   * The writable overlays are `volatile` where the kernel has it: without it, unmounting an
   * overlay syncs its upper layer's whole file system — the host's, where the target disk's image
   * and every other job's files sit too — so each attempt's end waited for the host to write out
   * whatever was dirty (about a second after a regex edit; docs/benchmarks.md, 2026-11-29 issue
   * 38). What volatile gives up is only the upper layer's durability across a host crash: the
   * workspace and home are the attempt's scratch, whose work directory is made afresh for each
   * attempt (overlayfs refuses a work directory a volatile mount left behind), and nothing is read
   * from them after a crash.
   */
  private staging(request: ExecutionRequest, setup: Setup, disk: KeptMount): { fstab: string } {
    const readOnly: [string, string][] = [
      ["toolchain", request.toolchain.path],
      ...setup.systemPaths.flatMap((p): [string, string][] => (p.kind === "directory" ? [[p.name, p.path]] : [])),
      ...(request.readOnlyBinds ?? []).map((bind, i): [string, string] => [`ro-${i}`, bind.source]),
    ];
    const writable: [string, string][] = [
      ["workspace", request.workspaceDir],
      ["home", request.homeDir],
    ];
    const lines: string[][] = [["kiln-empty", "empty", "tmpfs", "ro,mode=0755,size=4k,nr_inodes=1"]];
    for (const [name, source] of readOnly) {
      lines.push(
        [source, `lower/${name}`, "none", "bind"],
        ["kiln", name, "overlay", `ro,lowerdir=lower/${name}:empty`],
      );
    }
    for (const [name, directory] of writable) {
      const upper = `upper/${name}/${basename(directory)}`;
      const work = `upper/${name}/${basename(overlayWorkDirectory(directory))}`;
      lines.push(
        [dirname(directory), `upper/${name}`, "none", "bind"],
        [
          "kiln",
          name,
          "overlay",
          `lowerdir=empty,upperdir=${upper},workdir=${work}${setup.supportsVolatileOverlay ? ",volatile" : ""}`,
        ],
      );
    }
    lines.push([disk.mountPoint, "disk", "none", "bind"]);
    const line = ([source, target, type, options]: string[]) =>
      `${[source, target, type, `${options},X-mount.mkdir`, "0", "0"].map((f) => fstabField(f ?? "")).join(" ")}\n`;
    return { fstab: lines.map(line).join("") };
  }

  /** Tiny /etc/passwd, /etc/group and /etc/hosts, so user and "localhost" lookups work without the host's files. */
  private identityFiles(request: ExecutionRequest, user: SandboxUser): string[] {
    return [
      `${user.name}:x:${user.uid}:${user.gid}:kiln sandbox:${mountPointsOf(request).home}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
      `${user.name}:x:${user.gid}:\nnogroup:x:65534:\n`,
      "127.0.0.1\tlocalhost kiln-sandbox\n::1\tlocalhost ip6-localhost\n",
    ];
  }

  private bwrapArguments(request: ExecutionRequest, setup: Setup, detail: string[]): string[] {
    const stage = this.options.stagingDirectory;
    const toolchain = this.options.toolchainMountPoint;
    const mounts = mountPointsOf(request);
    const workingDirectory = resolve(mounts.workspace, request.workingDirectory);

    const environment = commandEnvironment(request, executorVariables(mounts, toolchain), detail).flatMap(
      ([name, value]) => ["--setenv", name, value],
    );

    return [
      "--unshare-all",
      "--unshare-user",
      ...(setup.supportsDisableUserns ? ["--disable-userns"] : []),
      "--die-with-parent",
      "--new-session",
      "--hostname",
      "kiln-sandbox",
      "--json-status-fd",
      "3",
      "--clearenv",
      ...environment,
      ...setup.systemPaths.flatMap((p) =>
        p.kind === "symlink" ? ["--symlink", p.target, p.path] : ["--ro-bind", `${stage}/${p.name}`, p.path],
      ),
      // The host's own software (/usr/local) shows as an empty directory.
      ...setup.hiddenDirectories.flatMap((path) => ["--ro-bind", `${stage}/empty`, path]),
      // The launcher's descriptor 6: the host's loader cache (empty where it has none), copied.
      "--ro-bind-data",
      "6",
      "/etc/ld.so.cache",
      "--ro-bind",
      `${stage}/passwd`,
      "/etc/passwd",
      "--ro-bind",
      `${stage}/group`,
      "/etc/group",
      "--ro-bind",
      `${stage}/hosts`,
      "/etc/hosts",
      "--proc",
      "/proc",
      ...setup.maskedProc.flatMap(({ path, directory }) => [
        "--ro-bind",
        `${stage}/${directory ? "empty" : "void"}`,
        path,
      ]),
      "--dev",
      "/dev",
      "--seccomp",
      "5",
      // A private /tmp; its pages are charged to the attempt's memory cgroup, and it is capped at the memory size too.
      ...(setup.supportsTmpfsSize ? ["--size", String(request.limits.memoryBytes)] : []),
      "--tmpfs",
      "/tmp",
      "--ro-bind",
      `${stage}/toolchain`,
      toolchain,
      // Job directories after /tmp, so that job directories under /tmp are not covered by the tmpfs.
      "--bind",
      `${stage}/workspace`,
      mounts.workspace,
      "--bind",
      `${stage}/disk/target`,
      mounts.target,
      "--bind",
      `${stage}/home`,
      mounts.home,
      ...(request.readOnlyBinds ?? []).flatMap((bind, i) => ["--ro-bind", `${stage}/ro-${i}`, bind.target]),
      // The sandbox's root (a tmpfs holding the mount points) read-only too: /etc, /opt, / itself.
      "--remount-ro",
      "/",
      "--chdir",
      workingDirectory,
    ];
  }
}

export function createSandboxExecutor(options: SandboxExecutorOptions = {}): Executor {
  return new SandboxExecutor(options);
}
