/**
 * The `sandbox` executor: one attempt in bubblewrap, as an unprivileged host user, inside a
 * per-attempt cgroup that carries the size's limits and is killed and removed afterwards.
 *
 * How one attempt is launched:
 *
 *   node ─spawn→ setpriv --pdeathsig=KILL     (dies with the agent, keeps root)
 *                └exec→ unshare --mount --pid --fork --kill-child
 *                       └fork→ bash LAUNCHER  (pid 1 of a fresh pid namespace, private mount namespace)
 *                              1. writes 0 ("myself") into the attempt's cgroup.procs files
 *                              2. closes every file descriptor the agent may have inherited
 *                              3. mounts a private staging tmpfs and bind-mounts the toolchain,
 *                                 the job directories and the read-only binds into it
 *                              └exec→ [prlimit, only for limits no cgroup could apply]
 *                              └exec→ setpriv: the sandbox user, no groups, no capabilities, no_new_privs
 *                              └exec→ bwrap: new user/mount/pid/net/ipc/uts/cgroup namespaces → the command
 *
 * Why joining the cgroup is race-free: the launcher moves *itself* (pid 0 means "the writer"),
 * as its first action, while it is the only process of the attempt: nothing of the job has run
 * and nothing has been forked. Every later process (setpriv, bwrap, the sandbox's init, the
 * command and all its descendants) is created from it afterwards and inherits the cgroup, so
 * no part of the attempt ever runs outside it and no pid can have been reused in between. If a
 * write fails the launcher exits before starting anything. (Only `unshare` itself, which merely
 * waits for its child, stays outside.)
 *
 * Why the extra pid namespace: its init is the launcher, which becomes bwrap's monitor. When
 * the init of a pid namespace exits, the kernel kills every process in it (nested namespaces
 * included) and the init's exit completes only once all of them are gone; `unshare` reports
 * exit only after that. So when the spawned process has exited, no process of the attempt
 * exists any more — not even the sandbox init bwrap leaves behind as a zombie for the host's
 * pid 1 to reap. `--kill-child` and `--pdeathsig` carry the agent's death down the chain
 * (bwrap's --die-with-parent takes it from there), so a crashed agent leaves nothing running.
 *
 * Why the staging mount: bubblewrap resolves bind sources as the unprivileged user, and the
 * toolchain lives under /root (mode 0700) while job directories may sit under root-only
 * directories. Binding them into a world-searchable tmpfs *inside the private mount namespace*
 * makes them reachable to bwrap without copying them or changing any permission on the host,
 * and the mounts vanish with the attempt — nothing is left mounted on the host.
 *
 * Where the job directories appear inside: at the request's mount points (the agent uses
 * fixed ones, /kiln/src, /kiln/target, /kiln/home, so that every attempt of a lineage sees the
 * same paths and cargo's path-hashing fingerprints stay fresh), else at their own host paths.
 */
import { execFile, spawn } from "node:child_process";
import { constants } from "node:fs";
import { access, lstat, mkdir, readlink, stat } from "node:fs/promises";
import { isAbsolute, join, relative, resolve } from "node:path";
import type { Readable } from "node:stream";
import { promisify } from "node:util";
import { AttemptCgroup, CgroupUnavailableError, type EnforcedLimits } from "./attempt-cgroup.js";
import { type CgroupLayout, detectCgroupLayout, readOwnCgroups } from "./cgroup-layout.js";
import { ensureSandboxUser, type SandboxUser } from "./ensure-sandbox-user.js";
import type { ExecutionOutcome, ExecutionRequest, ExecutionResult, Executor, MountPoints } from "./executor.js";
import { rlimitFallback } from "./rlimit-fallback.js";

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
  /** Where the toolchain appears inside the sandbox. Default /opt/kiln/toolchain. */
  readonly toolchainMountPoint?: string;
  /** Overrides detection; `NO_CGROUPS` forces the rlimit fallback. */
  readonly cgroupLayout?: CgroupLayout;
}

const DEFAULTS = {
  bwrapPath: "/usr/bin/bwrap",
  sandboxUser: "kiln-sandbox",
  cgroupParentName: "kiln",
  stagingDirectory: "/run/kiln/sandbox-stage",
  toolchainMountPoint: "/opt/kiln/toolchain",
};

/** The PATH the launcher itself (root, outside the sandbox) uses to find mount, setpriv, prlimit. */
const LAUNCHER_PATH = "/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * `bash -c LAUNCHER kiln-launch STAGE PROCS… -- NAME SOURCE… -- PASSWD GROUP HOSTS COMMAND…`
 * Runs as root, as pid 1 of a fresh pid namespace in a private mount namespace; see the file comment.
 * bash rather than sh because closing descriptors above 9 needs it (dash only redirects 0–9):
 * bwrap hands every open descriptor to the command, so anything the agent inherited without
 * close-on-exec would otherwise reach the sandbox.
 */
const LAUNCHER = [
  "set -eu",
  "stage=$1; shift",
  'while [ "$1" != "--" ]; do echo 0 > "$1" || exit 121; shift; done; shift',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a JavaScript template
  'for fd in /proc/self/fd/*; do fd=${fd##*/}; if [ "$fd" -gt 4 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi; done',
  'mount -t tmpfs -o mode=0755,size=1m,nosuid,nodev,noexec kiln-stage "$stage"',
  // One mkdir for every mount point (each external command costs a fork and exec, ~1.5 ms).
  'points=(); while [ "$1" != "--" ]; do points+=("$stage/$1" "$2"); shift 2; done; shift',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a JavaScript template
  'dirs=(); for ((i = 0; i < ${#points[@]}; i += 2)); do dirs+=("${points[i]}"); done; mkdir "${dirs[@]}"',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a JavaScript template
  'for ((i = 0; i < ${#points[@]}; i += 2)); do mount --bind "${points[i+1]}" "${points[i]}"; done',
  'for f in passwd group hosts; do printf "%s" "$1" > "$stage/$f"; shift; done',
  // From here on stderr is the job's (fd 4); the launcher's own stderr stays a diagnostics channel.
  'exec "$@" 2>&4 4>&-',
].join("\n");

/** Host system directories the toolchain needs, read-only at their own paths (or recreated as the same symlinks). */
const SYSTEM_PATHS = ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/alternatives", "/etc/ld.so.cache"];

/** Paths a job directory may not be (or be inside): the sandbox's own structure (plus the staging and toolchain paths). */
const RESERVED_PATHS = ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/dev", "/sys"];

interface Setup {
  readonly user: SandboxUser;
  readonly tools: {
    readonly unshare: string;
    readonly setpriv: string;
    readonly prlimit: string;
    readonly bash: string;
    readonly chown: string;
  };
  readonly bwrapVersion: string;
  readonly supportsDisableUserns: boolean;
  readonly supportsTmpfsSize: boolean;
  readonly systemBinds: readonly string[];
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

/** bwrap arguments that make the host's system directories visible read-only, mirroring symlinks (merged /usr). */
async function systemBindArguments(): Promise<string[]> {
  const args: string[] = [];
  for (const path of SYSTEM_PATHS) {
    try {
      const stats = await lstat(path);
      if (stats.isSymbolicLink()) args.push("--symlink", await readlink(path), path);
      else args.push("--ro-bind", path, path);
    } catch {
      // Absent on this distribution (e.g. no /lib64): nothing to bind.
    }
  }
  return args;
}

function within(path: string, parent: string): boolean {
  const rel = relative(parent, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/** Where the job directories appear inside: the request's mount points, else their host paths. */
function mountPointsOf(request: ExecutionRequest): MountPoints {
  return request.mounts ?? { workspace: request.workspaceDir, target: request.targetDir, home: request.homeDir };
}

/** Returns what is wrong with the request, or null. */
async function requestProblem(request: ExecutionRequest, reserved: readonly string[]): Promise<string | null> {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(request.attemptId))
    return `attemptId ${JSON.stringify(request.attemptId)} must be 1–128 of [A-Za-z0-9_.-]`;
  if (request.argv.length === 0) return "argv is empty";
  if (request.network !== "offline") return `network policy ${String(request.network)} is not supported`;
  if (!(request.wallClockSeconds > 0)) return "wallClockSeconds must be positive";
  const { vcpus, memoryBytes, pids } = request.limits;
  if (!(vcpus > 0) || !(memoryBytes > 0) || !(pids > 0)) return "limits must be positive";
  const directories: [string, string][] = [
    ["workspaceDir", request.workspaceDir],
    ["targetDir", request.targetDir],
    ["homeDir", request.homeDir],
    ["toolchain.path", request.toolchain.path],
    ...(request.readOnlyBinds ?? []).map((b, i): [string, string] => [`readOnlyBinds[${i}].source`, b.source]),
  ];
  for (const [name, path] of directories) {
    if (!isAbsolute(path) || resolve(path) !== path) return `${name} must be an absolute, normalized path: ${path}`;
    try {
      if (!(await stat(path)).isDirectory()) return `${name} is not a directory: ${path}`;
    } catch {
      return `${name} does not exist: ${path}`;
    }
    if (name === "toolchain.path") continue;
    // The host's memory-backed scratch (scratch-root.ts) lies under /dev, but it is a plain
    // tmpfs directory of the agent's, not part of any device tree the sandbox builds.
    const scratch = within(path, "/dev/shm") && path !== "/dev/shm";
    if (path === "/" || path === "/tmp" || (!scratch && [...RESERVED_PATHS, ...reserved].some((r) => within(path, r))))
      return `${name} may not be ${path}: it would cover the sandbox's own structure`;
  }
  // The in-sandbox side: the same rules as host paths (nothing may cover the sandbox's own
  // structure), and disjoint, so that no job directory hides part of another or a read-only bind.
  const mounts = mountPointsOf(request);
  const points: [string, string][] = [
    ["mounts.workspace", mounts.workspace],
    ["mounts.target", mounts.target],
    ["mounts.home", mounts.home],
    ...(request.readOnlyBinds ?? []).map((b, i): [string, string] => [`readOnlyBinds[${i}].target`, b.target]),
  ];
  for (const [name, path] of points) {
    if (!isAbsolute(path) || resolve(path) !== path) return `${name} must be an absolute, normalized path: ${path}`;
    if (path === "/" || path === "/tmp" || [...RESERVED_PATHS, ...reserved].some((r) => within(path, r)))
      return `${name} may not be ${path}: it would cover the sandbox's own structure`;
    for (const [other, otherPath] of points) {
      if (other !== name && (within(path, otherPath) || within(otherPath, path)))
        return `${name} (${path}) overlaps ${other} (${otherPath})`;
    }
  }
  if (!within(resolve(mounts.workspace, request.workingDirectory), mounts.workspace))
    return `workingDirectory ${JSON.stringify(request.workingDirectory)} leaves the workspace`;
  return null;
}

class SandboxExecutor implements Executor {
  readonly isolation = "sandbox" as const;
  private setupPromise: Promise<Setup> | null = null;
  private readonly options: typeof DEFAULTS & { readonly cgroupLayout?: CgroupLayout };

  constructor(options: SandboxExecutorOptions) {
    this.options = { ...DEFAULTS, ...options };
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
    const [unshare, setpriv, prlimit, bash, chown, user] = await Promise.all([
      findTool("unshare"),
      findTool("setpriv"),
      findTool("prlimit"),
      findTool("bash"),
      findTool("chown"),
      ensureSandboxUser(this.options.sandboxUser),
    ]);
    await mkdir(this.options.stagingDirectory, { recursive: true, mode: 0o755 });
    return {
      user,
      tools: { unshare, setpriv, prlimit, bash, chown },
      bwrapVersion,
      supportsDisableUserns: versionAtLeast(bwrapVersion, 0, 8),
      supportsTmpfsSize: versionAtLeast(bwrapVersion, 0, 7),
      systemBinds: await systemBindArguments(),
      layout: this.options.cgroupLayout ?? (await detectCgroupLayout()),
      ownCgroups: await readOwnCgroups(),
    };
  }

  async run(request: ExecutionRequest): Promise<ExecutionResult> {
    const startedAt = new Date();
    const detail: string[] = [];
    const result = (outcome: ExecutionOutcome, rest: Partial<ExecutionResult> = {}): ExecutionResult => ({
      outcome,
      exitCode: null,
      signal: null,
      oomKilled: false,
      cpuSeconds: null,
      peakMemoryBytes: null,
      ...rest,
      startedAt,
      finishedAt: new Date(),
      isolation: "sandbox",
      detail,
    });
    if (request.signal.aborted) {
      detail.push("cancelled before the sandbox started");
      return result("cancelled");
    }

    let setup: Setup;
    try {
      setup = await this.setup();
    } catch (error) {
      detail.push(`sandbox setup failed: ${errorText(error)}`);
      return result("infrastructure");
    }
    const problem = await requestProblem(request, [this.options.toolchainMountPoint, this.options.stagingDirectory]);
    if (problem !== null) {
      detail.push(`request refused: ${problem}`);
      return result("infrastructure");
    }
    detail.push(
      `isolation: sandbox — bubblewrap ${setup.bwrapVersion}; new user, mount, pid, network (loopback only), ipc, uts and cgroup namespaces${
        setup.supportsDisableUserns ? "; further user namespaces disabled inside" : ""
      }; host uid ${setup.user.uid} (${setup.user.name}), gid ${setup.user.gid}, no capabilities`,
      `toolchain: ${request.toolchain.name} from ${request.toolchain.path}, read-only at ${this.options.toolchainMountPoint}`,
    );

    try {
      // The job directories are the only writable places; the sandbox user must own them.
      const owner = `${setup.user.uid}:${setup.user.gid}`;
      // -R without -L never follows a symlink the job planted; --no-dereference changes links themselves.
      const recursive = request.warmTarget
        ? [request.workspaceDir, request.homeDir]
        : [request.workspaceDir, request.targetDir, request.homeDir];
      await run(setup.tools.chown, ["-R", "--no-dereference", owner, ...recursive]);
      // A warm target's tree is the sandbox user's already (only it ever wrote there); its top
      // directory was renamed into place by the agent and is handed over without a walk.
      if (request.warmTarget) await run(setup.tools.chown, ["--no-dereference", owner, request.targetDir]);
    } catch (error) {
      detail.push(`could not hand the job directories to ${setup.user.name}: ${errorText(error)}`);
      return result("infrastructure");
    }

    let cgroup: AttemptCgroup | null = null;
    try {
      cgroup = await AttemptCgroup.create({
        layout: setup.layout,
        ownCgroups: setup.ownCgroups,
        parentName: this.options.cgroupParentName,
        attemptId: request.attemptId,
        limits: request.limits,
      });
      detail.push(...cgroup.detail);
    } catch (error) {
      if (!(error instanceof CgroupUnavailableError)) {
        detail.push(`cgroup setup failed: ${errorText(error)}`);
        return result("infrastructure");
      }
      detail.push(`cgroups unavailable: ${error.message}; limits fall back to rlimits`);
    }

    try {
      if (request.signal.aborted) {
        detail.push("cancelled before the sandbox started");
        return result("cancelled");
      }
      return await this.launch(request, setup, cgroup, detail, result);
    } finally {
      if (cgroup !== null) {
        // Normally already done by launch(); this covers an exception thrown half-way.
        await cgroup.killAll();
        await cgroup.remove();
      }
    }
  }

  private async launch(
    request: ExecutionRequest,
    setup: Setup,
    cgroup: AttemptCgroup | null,
    detail: string[],
    result: (outcome: ExecutionOutcome, rest?: Partial<ExecutionResult>) => ExecutionResult,
  ): Promise<ExecutionResult> {
    const noCgroupLimits: EnforcedLimits = { cpu: false, memory: false, pids: false };
    const fallback = rlimitFallback(request.limits, cgroup?.enforced ?? noCgroupLimits);
    detail.push(...fallback.detail);
    if (cgroup !== null)
      detail.push(
        `placement: the launcher wrote its own pid to ${cgroup.procsFiles.length} cgroup.procs file(s) before starting anything`,
      );

    const command = [
      setup.tools.bash,
      "-c",
      LAUNCHER,
      "kiln-launch",
      this.options.stagingDirectory,
      ...(cgroup?.procsFiles ?? []),
      "--",
      ...this.stagedSources(request),
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
        // 0 nothing, 1 the job's stdout, 2 the launcher's diagnostics, 3 bwrap's status, 4 the job's stderr.
        stdio: ["ignore", "pipe", "pipe", "pipe", "pipe"],
        env: { PATH: LAUNCHER_PATH },
      },
    );
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
    child.stdout?.on("data", (chunk: Buffer) => emit("stdout", chunk));
    (child.stdio[4] as Readable | null)?.on("data", (chunk: Buffer) => {
      emit("stderr", chunk);
      stderrTail = (stderrTail + chunk.toString("utf8")).slice(-2000);
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
      if (cgroup !== null) await cgroup.killAll();
      // Without a cgroup, killing the launcher is enough: unshare's --kill-child takes down the
      // pid namespace's init, and with it the kernel kills every process in the namespace.
      else child.kill("SIGKILL");
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

  /** NAME SOURCE pairs for the launcher's staging mounts. */
  private stagedSources(request: ExecutionRequest): string[] {
    return [
      "toolchain",
      request.toolchain.path,
      "workspace",
      request.workspaceDir,
      "target",
      request.targetDir,
      "home",
      request.homeDir,
      ...(request.readOnlyBinds ?? []).flatMap((bind, i) => [`ro-${i}`, bind.source]),
    ];
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

    // The executor's variables win over declared ones of the same name; RUSTUP_TOOLCHAIN is never
    // set (there is no rustup inside: the toolchain's own cargo and rustc are on PATH).
    const executorVariables: Record<string, string> = {
      PATH: `${toolchain}/bin:/usr/bin:/bin`,
      HOME: mounts.home,
      CARGO_HOME: mounts.home,
      CARGO_TARGET_DIR: mounts.target,
      CARGO_NET_OFFLINE: "true",
    };
    const environment: string[] = [];
    for (const [name, value] of Object.entries(request.environment)) {
      if (name in executorVariables || name === "RUSTUP_TOOLCHAIN") {
        detail.push(`environment: declared ${name} is set by the executor and was not used`);
      } else if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || value.includes("\0")) {
        detail.push(`environment: declared ${JSON.stringify(name)} is not a valid variable and was not set`);
      } else environment.push("--setenv", name, value);
    }
    for (const [name, value] of Object.entries(executorVariables)) environment.push("--setenv", name, value);

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
      ...setup.systemBinds,
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
      "--dev",
      "/dev",
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
      `${stage}/target`,
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
