/**
 * The `microvm` executor: one attempt in its own QEMU microVM, with its own kernel. The VM's
 * shape is the size's (vCPUs, memory); it has no network device at all, only disks and the
 * three ports of its guest agent (launch-microvm.ts). What the host does per attempt:
 *
 * 1. The disks: the guest root and the admitted toolchain's image (guest-images.ts, built once
 *    and shared read-only by every VM), the workspace as an ext4 image of the host directory,
 *    each read-only bind (the dependency gateway's packages) as an erofs image, and the
 *    lineage's target disk itself — the same sparse ext4 image the sandbox uses, with the size's
 *    disk quota set in its superblock (target-disk.ts), under the microVM's own file name.
 * 2. A cgroup around QEMU: the size's CPU quota and weight, memory for the guest plus QEMU's own
 *    overhead, and a bound on QEMU's threads (the job's process count is bounded inside the
 *    guest, by the agent's cgroup there).
 * 3. The VM started; when its agent says `hello` the request goes (the command, its environment
 *    and working directory, the mount points, the job's uid, the host's clock), when it says
 *    `ready` the command runs and the wall-clock ceiling starts; its stdout and stderr stream as
 *    they come, in the one order the command wrote them (frames on the output port); `exit` says
 *    how it ended, and once the host has that and the output's end frame it lets the VM power
 *    itself off.
 * 4. Afterwards: QEMU's cgroup read (its CPU time is the attempt's vCPU-seconds) and removed,
 *    the target disk's usage read from its superblock, the workspace read back with debugfs
 *    (guest-disks.ts says why never a mount).
 *
 * The ceiling, a cancel and a VM that never becomes ready kill QEMU's whole cgroup; the guest's
 * OOM kills and the forks its cgroup refused are reported as the sandbox reports its own — from
 * the `exit` line, or, for a VM killed while its command ran, from the counters the host asks the
 * agent for just before it kills (waiting for them a bounded time).
 */
import { chown, mkdir, rm } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import type { AttemptDiskPolicy, ExecutionRequest, ExecutionResult, Executor } from "../executor.js";
import { AttemptCgroup, CgroupUnavailableError } from "../shared/attempt-cgroup.js";
import { beginAttempt } from "../shared/begin-attempt.js";
import { type CgroupLayout, detectCgroupLayout, readOwnCgroups } from "../shared/cgroup-layout.js";
import { commandEnvironment, executorVariables } from "../shared/command-environment.js";
import { ensureSandboxUser, type SandboxUser } from "../shared/ensure-sandbox-user.js";
import { OutputFrames } from "../shared/output-frames.js";
import { mountPointsOf } from "../shared/request-problem.js";
import { diskTools, gib, prepareTargetDisk, reportTargetDiskUsage } from "../shared/target-disk.js";
import { encodeRequest, type GuestLine, GuestLineReader, HOST_SAYS, PowerOffAcknowledgement } from "./guest-channel.js";
import { MICROVM_TARGET_DISK_FILE, makeReadOnlyDisk, makeWorkspaceDisk, readWorkspaceBack } from "./guest-disks.js";
import type { GuestBoot, GuestImages } from "./guest-images.js";
import { hostTscKhz, launchMicrovm, type MicrovmDisk } from "./launch-microvm.js";
import { kvmGroupAccess } from "./probe-guest.js";

export interface MicrovmExecutorOptions {
  readonly images: GuestImages;
  /** `kvm` where the host's KVM boots a guest; `tcg` (software emulation) only when an operator or a test says so. */
  readonly accel: "kvm" | "tcg";
  /** Default /usr/bin/qemu-system-x86_64. */
  readonly qemuPath?: string;
  /** Default /usr/bin/bwrap (QEMU's jail). */
  readonly bwrapPath?: string;
  /** The unprivileged host user QEMU runs as, and the job's uid inside the guest. Default "kiln-sandbox". */
  readonly sandboxUser?: string;
  /** The cgroup grouping all attempts. Default "kiln". */
  readonly cgroupParentName?: string;
  /** Where the toolchain appears inside the guest. Default /opt/kiln/toolchain. */
  readonly toolchainMountPoint?: string;
  /** The largest disk quota this host grants one attempt (as the sandbox's). */
  readonly maxDiskBytes?: number;
  /** How long a VM may take from start to its agent's `ready` (its boot), default 60 s under KVM, 300 s under TCG. */
  readonly readySeconds?: number;
  /** Overrides detection. */
  readonly cgroupLayout?: CgroupLayout;
}

export const MICROVM_DEFAULTS = {
  qemuPath: "/usr/bin/qemu-system-x86_64",
  bwrapPath: "/usr/bin/bwrap",
  sandboxUser: "kiln-sandbox",
  cgroupParentName: "kiln",
  toolchainMountPoint: "/opt/kiln/toolchain",
};

/** QEMU's own memory beyond the guest's: its code, devices and buffers; under TCG also its translation cache (512 MiB). */
const QEMU_OVERHEAD_BYTES = { kvm: 256 * 2 ** 20, tcg: 768 * 2 ** 20 };

/** QEMU's threads (vCPUs, I/O workers, RCU): bounded in the host cgroup; the job's processes are bounded in the guest. */
const QEMU_PIDS = 256;

/** How long a VM that said `exit` may take to finish its output and power itself off before it is killed. */
const POWER_OFF_MS = 30_000;

/**
 * How long the host waits for the agent's counters before it kills a VM whose command still runs
 * (at the ceiling, on a cancel): the agent answers at once, but a guest under emulation on a
 * loaded host is slow. Only what a kill reports depends on it, never whether it happens.
 */
const COUNTERS_WAIT_MS = { kvm: 2_000, tcg: 10_000 };

/** The longest output frame a guest may announce: the agent's largest datagram (8 MiB) and a margin. */
const MAX_OUTPUT_FRAME_BYTES = 9 * 2 ** 20;

interface Setup {
  readonly user: SandboxUser;
  readonly boot: GuestBoot;
  readonly tscKhz: number | null;
  readonly kvmGroup: number | null;
  readonly layout: CgroupLayout;
  readonly ownCgroups: ReadonlyMap<string, string>;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const SIGNALS: Record<number, string> = {
  1: "SIGHUP",
  2: "SIGINT",
  6: "SIGABRT",
  9: "SIGKILL",
  11: "SIGSEGV",
  15: "SIGTERM",
};

export class MicrovmExecutor implements Executor {
  readonly isolation = "microvm" as const;
  readonly disk: AttemptDiskPolicy;
  private setupPromise: Promise<Setup> | null = null;
  private readonly options: typeof MICROVM_DEFAULTS & Omit<MicrovmExecutorOptions, keyof typeof MICROVM_DEFAULTS>;

  constructor(options: MicrovmExecutorOptions) {
    this.options = { ...MICROVM_DEFAULTS, ...options };
    this.disk = { maxAttemptBytes: options.maxDiskBytes ?? null };
  }

  /** Once per executor: the user, the guest's boot images (built once), cgroups; a failure is tried again next time. */
  setup(): Promise<Setup> {
    this.setupPromise ??= this.performSetup();
    this.setupPromise.catch(() => {
      this.setupPromise = null;
    });
    return this.setupPromise;
  }

  private async performSetup(): Promise<Setup> {
    if (process.getuid?.() !== 0)
      throw new Error("the microvm executor must run as root (it confines QEMU as the sandbox user itself)");
    const [user, { boot }, tscKhz, layout, ownCgroups] = await Promise.all([
      ensureSandboxUser(this.options.sandboxUser),
      this.options.images.ensureBoot(),
      hostTscKhz(),
      this.options.cgroupLayout === undefined ? detectCgroupLayout() : Promise.resolve(this.options.cgroupLayout),
      readOwnCgroups(),
    ]);
    if (this.options.accel === "tcg" && tscKhz === null)
      throw new Error("the host's TSC rate is unknown (/proc/cpuinfo names no cpu MHz); a TCG guest cannot keep time");
    return {
      user,
      boot,
      tscKhz,
      kvmGroup: this.options.accel === "kvm" ? await kvmGroupAccess() : null,
      layout,
      ownCgroups,
    };
  }

  async run(request: ExecutionRequest): Promise<ExecutionResult> {
    const begun = await beginAttempt("microvm", request, () => this.setup(), [this.options.toolchainMountPoint]);
    if ("refused" in begun) return begun.refused;
    const { result, detail, setup } = begun;
    const { limits } = request;
    detail.push(
      `isolation: microvm — QEMU microvm (${this.options.accel === "kvm" ? "KVM" : "TCG: software emulation, no hardware virtualization"}), kernel ${setup.boot.kernelRelease}, ${Math.ceil(limits.vcpus)} vCPU, ${gib(limits.memoryBytes)} of guest memory; no network device; the command runs as uid ${setup.user.uid} in the guest`,
      `jail: QEMU runs as ${setup.user.name} (uid ${setup.user.uid}), no capabilities, in new user, mount, pid, network, ipc and uts namespaces (bubblewrap) with its own seccomp filter (-sandbox on)`,
      `mounts: the job's directories at ${Object.values(mountPointsOf(request)).join(", ")}, each a disk of its own; the guest root and toolchain read-only images`,
      `toolchain: ${request.toolchain.name} from ${request.toolchain.path}, read-only at ${this.options.toolchainMountPoint}`,
    );

    const vmDirectory = join(dirname(request.homeDir), `.kiln-microvm-${request.attemptId}`);
    const quotaBytes = Math.min(limits.diskBytes, this.options.maxDiskBytes ?? Number.POSITIVE_INFINITY);
    const owner = `${setup.user.uid}:${setup.user.gid}`;
    // The disks and the cgroup, side by side (each is file system or cgroupfs work). The guest's
    // boot artifacts are marked in use, so another host or checkout sharing the guest directory
    // never removes them as superseded while this host boots from them (guest-images.ts).
    const preparing = Date.now();
    const [toolchainImage, targetDisk, workspace, readOnly, createdCgroup] = await Promise.allSettled([
      this.options.images
        .markInUse([dirname(setup.boot.kernel), setup.boot.initramfs, setup.boot.root])
        .then(() => this.options.images.ensureToolchain(request.toolchain)),
      (async () => {
        const disk = await prepareTargetDisk(
          await diskTools(),
          request.targetDir,
          quotaBytes,
          owner,
          MICROVM_TARGET_DISK_FILE,
        );
        await chown(disk.image, setup.user.uid, setup.user.gid);
        return disk;
      })(),
      (async () => {
        await mkdir(vmDirectory, { recursive: true, mode: 0o700 });
        const image = join(vmDirectory, "workspace.ext4");
        await makeWorkspaceDisk(request.workspaceDir, image, limits.memoryBytes, setup.user);
        return image;
      })(),
      (async () => {
        await mkdir(vmDirectory, { recursive: true, mode: 0o700 });
        const images: string[] = [];
        for (const [index, bind] of (request.readOnlyBinds ?? []).entries()) {
          const image = join(vmDirectory, `ro-${index}.erofs`);
          await makeReadOnlyDisk(bind.source, image);
          images.push(image);
        }
        return images;
      })(),
      AttemptCgroup.create({
        layout: setup.layout,
        ownCgroups: setup.ownCgroups,
        parentName: this.options.cgroupParentName,
        attemptId: request.attemptId,
        limits: {
          ...limits,
          memoryBytes: limits.memoryBytes + QEMU_OVERHEAD_BYTES[this.options.accel],
          pids: QEMU_PIDS,
        },
      }),
    ]);
    const cgroup = createdCgroup.status === "fulfilled" ? createdCgroup.value : null;
    const cleanUp = async () => {
      if (cgroup !== null) {
        await cgroup.killAll();
        await cgroup.remove();
      }
      await rm(vmDirectory, { recursive: true, force: true });
    };
    const failed = async (line: string): Promise<ExecutionResult> => {
      detail.push(line);
      await cleanUp();
      return result("infrastructure");
    };
    if (toolchainImage.status === "rejected")
      return failed(`toolchain image: could not be built: ${errorText(toolchainImage.reason)}`);
    if (targetDisk.status === "rejected")
      return failed(`disk: the target disk could not be prepared: ${errorText(targetDisk.reason)}`);
    if (workspace.status === "rejected")
      return failed(`disk: the workspace disk could not be made: ${errorText(workspace.reason)}`);
    if (readOnly.status === "rejected")
      return failed(`disk: a read-only disk could not be made: ${errorText(readOnly.reason)}`);
    if (createdCgroup.status === "rejected")
      return failed(
        createdCgroup.reason instanceof CgroupUnavailableError
          ? `cgroups unavailable: ${createdCgroup.reason.message}; a microVM runs only inside its cgroup`
          : `cgroup setup failed: ${errorText(createdCgroup.reason)}`,
      );
    if (quotaBytes < limits.diskBytes)
      detail.push(
        `disk: this host grants at most ${gib(quotaBytes)} per attempt, below the size's ${gib(limits.diskBytes)}`,
      );
    detail.push(
      `disks: prepared in ${Date.now() - preparing} ms`,
      ...targetDisk.value.notes,
      `disk: the workspace is a disk of its own that may grow by the size's memory (${gib(limits.memoryBytes)}); home, /tmp are the guest's memory`,
      ...(cgroup?.detail ?? []),
    );

    try {
      if (request.signal.aborted) {
        detail.push("cancelled before the microVM started");
        return result("cancelled");
      }
      const disks: MicrovmDisk[] = [
        { serial: "kiln-root", path: setup.boot.root, readOnly: true },
        { serial: "kiln-toolchain", path: toolchainImage.value.path, readOnly: true },
        { serial: "kiln-workspace", path: workspace.value, readOnly: false },
        { serial: "kiln-target", path: targetDisk.value.image, readOnly: false },
        ...readOnly.value.map((path, index) => ({ serial: `kiln-ro-${index}`, path, readOnly: true })),
      ];
      const ran = await this.boot(request, setup, cgroup as AttemptCgroup, disks, detail);
      const measured: Partial<ExecutionResult> = {
        oomKilled: ran.oomKilled,
        cpuSeconds: ran.usage?.cpuSeconds ?? null,
        peakMemoryBytes: ran.usage?.peakMemoryBytes ?? null,
      };
      const disk = await reportTargetDiskUsage(targetDisk.value.image, quotaBytes, detail);
      if (ran.ending !== null) return result(ran.ending, { ...measured, ...disk, signal: "SIGKILL" });
      if (ran.exit === null) return result("infrastructure", { ...measured, ...disk });
      try {
        await readWorkspaceBack(workspace.value, request.workspaceDir, setup.user);
      } catch (error) {
        detail.push(`the workspace could not be read back from its disk: ${errorText(error)}`);
        return result("infrastructure", { ...measured, ...disk });
      }
      const { code, signal } = ran.exit;
      return result("exited", {
        ...measured,
        ...disk,
        exitCode: code ?? (signal === null ? null : 128 + signal),
        signal: signal === null ? null : (SIGNALS[signal] ?? `signal ${signal}`),
      });
    } finally {
      await cleanUp();
    }
  }

  /** Runs the VM to its end; says how it ended (the caller maps that to an outcome). */
  private async boot(
    request: ExecutionRequest,
    setup: Setup,
    cgroup: AttemptCgroup,
    disks: readonly MicrovmDisk[],
    detail: string[],
  ): Promise<{
    ending: "wall_clock_ceiling" | "cancelled" | null;
    exit: { code: number | null; signal: number | null } | null;
    oomKilled: boolean;
    usage: Awaited<ReturnType<AttemptCgroup["usage"]>> | null;
  }> {
    const accel = this.options.accel;
    const vm = await launchMicrovm({
      name: `kiln-${request.attemptId}`,
      qemuPath: this.options.qemuPath,
      bwrapPath: this.options.bwrapPath,
      accel,
      vcpus: request.limits.vcpus,
      memoryBytes: request.limits.memoryBytes,
      kernel: setup.boot.kernel,
      initramfs: setup.boot.initramfs,
      disks,
      user: setup.user,
      kvmGroup: setup.kvmGroup,
      procsFiles: cgroup.procsFiles,
      tscKhz: setup.tscKhz,
    });
    const launchedAt = Date.now();
    // What the VM did, as the callbacks below learn it.
    const seen: {
      ending: "wall_clock_ceiling" | "cancelled" | "not_ready" | "broken_output" | null;
      exit: { code: number | null; signal: number | null; oomKills: number; pidsRefused: number } | null;
      counters: { oomKills: number; pidsRefused: number } | null;
      outputEnded: boolean;
      agentError: string | null;
      readyAt: number | null;
    } = { ending: null, exit: null, counters: null, outputEnded: false, agentError: null, readyAt: null };
    let ceiling: NodeJS.Timeout | null = null;
    let poweringOff: NodeJS.Timeout | null = null;
    let killing: NodeJS.Timeout | null = null;
    const kill = () => {
      if (killing !== null) clearTimeout(killing);
      vm.kill();
      cgroup.killAll().catch((error: unknown) => detail.push(`killing the microVM failed: ${errorText(error)}`));
    };
    const powerOff = new PowerOffAcknowledgement(() => vm.control.write(HOST_SAYS.acknowledged));
    const end = (reason: "wall_clock_ceiling" | "cancelled" | "not_ready" | "broken_output") => {
      if (seen.ending !== null || seen.exit !== null) return;
      seen.ending = reason;
      // A command that runs has counters only its agent can read: asked for first, then the kill.
      if (seen.readyAt === null || reason === "broken_output") return kill();
      vm.control.write(HOST_SAYS.counters);
      killing = setTimeout(kill, COUNTERS_WAIT_MS[accel]);
    };
    const frames = new OutputFrames(
      (stream, chunk) => {
        try {
          request.onOutput(stream, chunk);
        } catch {
          // A failing consumer must not break the attempt's bookkeeping.
        }
      },
      {
        maxFrameBytes: MAX_OUTPUT_FRAME_BYTES,
        onEnd: () => {
          seen.outputEnded = true;
          powerOff.outputEnded();
        },
      },
    );
    vm.output.on("data", (chunk: Buffer) => {
      if (seen.ending === "broken_output") return;
      try {
        frames.push(chunk);
      } catch (error) {
        // Whatever the guest sends is untrusted: output that breaks the framing ends the VM.
        detail.push(
          `output: the guest's output channel broke its framing (${errorText(error)}); the microVM was killed`,
        );
        end("broken_output");
      }
    });
    const outputClosed = new Promise<void>((done) => vm.output.once("close", () => done()));
    const readySeconds = this.options.readySeconds ?? (accel === "kvm" ? 60 : 300);
    const notReady = setTimeout(() => end("not_ready"), readySeconds * 1000);
    const reader = new GuestLineReader((line: GuestLine) => {
      switch (line.kind) {
        case "hello":
          vm.control.write(this.requestFor(request, setup, detail));
          break;
        case "ready":
          if (seen.readyAt !== null) break;
          seen.readyAt = Date.now();
          clearTimeout(notReady);
          detail.push(
            `boot: the guest agent was ready ${((seen.readyAt - launchedAt) / 1000).toFixed(2)} s after QEMU started`,
          );
          ceiling = setTimeout(() => end("wall_clock_ceiling"), request.wallClockSeconds * 1000);
          break;
        case "counters":
          seen.counters = line;
          if (seen.ending !== null) kill();
          break;
        case "exit":
          if (seen.readyAt === null || seen.exit !== null || seen.ending !== null) break;
          seen.exit = line;
          if (ceiling !== null) clearTimeout(ceiling);
          powerOff.exited();
          poweringOff = setTimeout(() => vm.kill(), POWER_OFF_MS);
          break;
        case "error":
          seen.agentError ??= line.message;
          break;
        default:
          break;
      }
    });
    vm.control.on("data", (chunk: Buffer) => reader.push(chunk));
    const onAbort = () => end("cancelled");
    request.signal.addEventListener("abort", onAbort, { once: true });
    if (request.signal.aborted) onAbort();

    const exited = await vm.exited;
    clearTimeout(notReady);
    if (ceiling !== null) clearTimeout(ceiling);
    if (poweringOff !== null) clearTimeout(poweringOff);
    if (killing !== null) clearTimeout(killing);
    request.signal.removeEventListener("abort", onAbort);
    const emptied = await cgroup.killAll();
    // Both sockets close once QEMU is gone; bounded in case a kernel keeps a killed process unusually long.
    await Promise.race([outputClosed, new Promise((r) => setTimeout(r, 5000).unref())]);
    const cutOff = frames.end();
    if (cutOff > 0) detail.push(`output: the guest ended in the middle of a write; its last ${cutOff} bytes are lost`);
    if (seen.exit !== null && !seen.outputEnded)
      detail.push("output: the microVM ended before its output's end arrived; output may be missing");
    vm.control.destroy();
    const usage = await cgroup.usage();
    const failures = await cgroup.remove();
    detail.push(
      emptied && failures.length === 0
        ? "cleanup: QEMU has exited and no process of the attempt remains; its cgroup was removed"
        : `cleanup incomplete: ${emptied ? "" : "processes remained after SIGKILL; "}${failures.join("; ")}`,
    );
    if (usage.cpuSeconds !== null)
      detail.push(`cpu: QEMU used ${usage.cpuSeconds.toFixed(2)} CPU-seconds (the attempt's vCPU-seconds)`);

    const settled = seen.exit;
    // The exit line's counters are final; a VM killed while its command ran has those it answered just before.
    const counters = settled ?? seen.counters;
    const guestOom = (counters?.oomKills ?? 0) > 0;
    if (guestOom) detail.push("memory: the guest kernel OOM-killed a process at the attempt's memory (the VM's)");
    if (usage.oomKilled)
      detail.push("memory: the host killed QEMU at its cgroup's memory limit (the guest's memory and QEMU's overhead)");
    if ((counters?.pidsRefused ?? 0) > 0)
      detail.push(
        `pids: the guest kernel refused ${counters?.pidsRefused} forks at the attempt's limit of ${request.limits.pids} processes`,
      );
    const killedWhileRunning =
      seen.readyAt !== null && (seen.ending === "wall_clock_ceiling" || seen.ending === "cancelled");
    if (killedWhileRunning && seen.counters === null)
      detail.push(
        "counters: the guest agent did not say its OOM kills and refused forks before the microVM was killed; none are reported",
      );
    const oomKilled = guestOom || usage.oomKilled;
    const finished = seen.ending;
    if (finished === "cancelled" || finished === "wall_clock_ceiling") {
      detail.push(
        finished === "cancelled"
          ? "cancelled: the microVM was killed with everything in it"
          : `wall-clock ceiling of ${request.wallClockSeconds} s reached: the microVM was killed with everything in it`,
      );
      // A guest that hangs rather than computes says why only on its console, where its kernel
      // prints warnings and errors: a soft lockup's or an RCU stall's report and backtrace.
      if (finished === "wall_clock_ceiling" && vm.consoleTail() !== "")
        detail.push(`console: ${vm.consoleTail().slice(-3000)}`);
      return { ending: finished, exit: null, oomKilled, usage };
    }
    if (settled === null) {
      const why =
        finished === "not_ready"
          ? `the microVM did not become ready within ${readySeconds} s`
          : seen.agentError !== null
            ? `the guest agent could not run the command: ${seen.agentError}`
            : exited.error !== undefined
              ? `QEMU could not be started: ${exited.error.message}`
              : `QEMU exited (${exited.code ?? exited.signal}) before the command ended`;
      detail.push(why, ...(vm.consoleTail() === "" ? [] : [`console: ${vm.consoleTail().slice(-1500)}`]));
      return { ending: null, exit: null, oomKilled, usage };
    }
    return { ending: null, exit: settled, oomKilled, usage };
  }

  /** The guest agent's request: the command, its environment and working directory, where each disk goes, who runs it. */
  private requestFor(request: ExecutionRequest, setup: Setup, detail: string[]): Buffer {
    const mounts = mountPointsOf(request);
    const environment = commandEnvironment(
      request,
      executorVariables(mounts, this.options.toolchainMountPoint),
      detail,
    );
    return encodeRequest([
      ["uid", String(setup.user.uid)],
      ["gid", String(setup.user.gid)],
      ["memory", String(request.limits.memoryBytes)],
      ["now", String(BigInt(Date.now()) * 1_000_000n)],
      ["hostname", "kiln-microvm"],
      ["toolchain", this.options.toolchainMountPoint],
      ["workspace", mounts.workspace],
      ["target", mounts.target],
      ["home", mounts.home],
      ["pids", String(request.limits.pids)],
      ["cwd", resolve(mounts.workspace, request.workingDirectory)],
      ...request.argv.map((arg): [string, string] => ["argv", arg]),
      ...environment.map(([name, value]): [string, string] => ["env", `${name}=${value}`]),
      ...(request.readOnlyBinds ?? []).map((bind): [string, string] => ["bind", bind.target]),
    ]);
  }
}

export function createMicrovmExecutor(options: MicrovmExecutorOptions): MicrovmExecutor {
  return new MicrovmExecutor(options);
}
