/**
 * Starting one microVM: QEMU's `microvm` machine (no PCI, virtio-mmio devices, the kernel booted
 * directly), no network device at all, its disks and its three virtio-serial ports handed over
 * as open file descriptors, and QEMU itself confined the way Firecracker's jailer confines its
 * VMM — a guest that escapes into QEMU finds an unprivileged process with nothing to reach:
 *
 *   node ─spawn→ setpriv --pdeathsig=KILL               (root; dies with the agent)
 *                └exec→ unshare --pid --fork --kill-child
 *                       └fork→ bash LAUNCHER           pid 1 of a fresh pid namespace: when it exits,
 *                                                      every process below it is gone before unshare
 *                                                      reports (kill-launcher.ts), so nothing of the
 *                                                      VM outlives `exited`;
 *                                                      joins the attempt's cgroup (writes its own pid),
 *                                                      closes every descriptor but those handed over
 *                └exec→ setpriv                        the sandbox user, no groups (kvm's alone under
 *                                                      KVM), no capabilities, no_new_privs, and
 *                                                      again --pdeathsig=KILL (a credential change
 *                                                      clears it)
 *                └exec→ bwrap                          new user, mount, pid, network, ipc, uts and
 *                                                      cgroup namespaces: /usr read-only, /proc,
 *                                                      a minimal /dev (with /dev/kvm under KVM),
 *                                                      nothing of the host's data, no network
 *                       └→ qemu-system-x86_64 -sandbox on,…  QEMU's own seccomp filter: no
 *                                                      spawning, no privilege changes
 *
 * QEMU opens the kernel, the initramfs and each disk through /proc/self/fd/N — descriptors the
 * agent opened — so the jail needs no path to the host's data directory; the control and output
 * ports are connected sockets (descriptors 3, 4) whose other ends the host reads.
 * Everything QEMU runs is in the attempt's cgroup from its first instruction: the launcher
 * writes its own pid before it execs anything else.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { lstat, open, readFile, readlink } from "node:fs/promises";
import type { Readable, Writable } from "node:stream";
import type { SandboxUser } from "../shared/ensure-sandbox-user.js";
import { killLauncher } from "../shared/kill-launcher.js";

/** One disk of the VM: the guest finds it by its serial (virtio-blk serials are at most 20 bytes). */
export interface MicrovmDisk {
  readonly serial: string;
  readonly path: string;
  readonly readOnly: boolean;
}

export interface MicrovmSpec {
  /** QEMU's `-name`: `kiln-<attempt id>`, so the process says whose it is. */
  readonly name: string;
  readonly qemuPath: string;
  readonly bwrapPath: string;
  readonly accel: "kvm" | "tcg";
  readonly vcpus: number;
  readonly memoryBytes: number;
  readonly kernel: string;
  readonly initramfs: string;
  readonly disks: readonly MicrovmDisk[];
  /** The unprivileged user QEMU runs as. */
  readonly user: SandboxUser;
  /** Under KVM, the group that may open /dev/kvm (QEMU's one supplementary group). */
  readonly kvmGroup: number | null;
  /** The attempt cgroup's `cgroup.procs` files the launcher joins before anything else runs. */
  readonly procsFiles: readonly string[];
  /** Under TCG: the host's TSC rate, which the guest's clock then runs at (`tsc_early_khz`). */
  readonly tscKhz: number | null;
}

export interface RunningMicrovm {
  readonly control: Readable & Writable;
  /** The command's stdout and stderr as one ordered stream of frames (shared/output-frames.ts). */
  readonly output: Readable;
  /** The serial console and QEMU's own complaints, last few KiB (diagnostics when the guest says nothing). */
  consoleTail(): string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>;
  /** Kills the launcher chain (and with it QEMU); the cgroup is the backstop. */
  kill(): void;
}

const LAUNCHER_PATH = "/usr/sbin:/usr/bin:/sbin:/bin";

/** The descriptors the VM gets: 0 none, 1 the serial console, 2 QEMU's stderr, 3–4 the ports, then files. */
const FIRST_FILE_FD = 5;

/**
 * `bash -c LAUNCHER kiln-microvm MAXFD PROCS… -- COMMAND…`: writes its own pid into each
 * cgroup.procs file (nothing else of the VM exists yet), closes every descriptor above MAXFD
 * (anything the agent inherited without close-on-exec), then execs the command.
 */
const LAUNCHER = [
  "set -eu",
  "max=$1; shift",
  'while [ "$1" != "--" ]; do echo "$$" > "$1" || exit 121; shift; done; shift',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a JavaScript template
  'for fd in /proc/self/fd/*; do fd=${fd##*/}; if [ "$fd" -gt "$max" ]; then eval "exec $fd>&-" 2>/dev/null || true; fi; done',
  'exec "$@"',
].join("\n");

/** The host's system directories as the jail shows them: the same symlinks, or read-only binds. */
async function systemBinds(): Promise<string[]> {
  const args: string[] = ["--ro-bind", "/usr", "/usr"];
  for (const path of ["/lib", "/lib64", "/bin", "/sbin"]) {
    const stats = await lstat(path).catch(() => null);
    if (stats?.isSymbolicLink()) args.push("--symlink", await readlink(path), path);
    else if (stats?.isDirectory()) args.push("--ro-bind", path, path);
  }
  return args;
}

/** The host's TSC rate in kHz (the first CPU's "cpu MHz", which constant_tsc makes the TSC's), or null. */
export async function hostTscKhz(): Promise<number | null> {
  const cpuinfo = await readFile("/proc/cpuinfo", "utf8").catch(() => "");
  const mhz = /^cpu MHz\s*:\s*([\d.]+)/m.exec(cpuinfo)?.[1];
  return mhz === undefined ? null : Math.round(Number(mhz) * 1000);
}

/**
 * The guest kernel's command line: the serial console at warning level (a few lines at boot; a
 * soft lockup's, an RCU stall's or a hung task's report with its backtrace, which `quiet` would
 * cut to its first line — the host keeps the console's tail as a failed or timed-out attempt's
 * diagnostics), a panic powers the VM off at once (-no-reboot), no PCI to probe, and no
 * speculative-execution mitigations: they keep a kernel's processes from reading its memory, and
 * this kernel runs one job's processes and the agent only — the job's own guest, whose boundary
 * is the VM (the host's kernel keeps its own mitigations). No known-answer self-tests of the
 * kernel's crypto implementations at boot (the guest's one user of them is ext4's crc32c): under
 * TCG they were about a tenth of a boot's CPU time (docs/benchmarks.md). Under TCG the TSC's rate is given, as
 * this kernel finds no timer to calibrate it against on a microvm machine and would otherwise
 * hang at boot.
 */
export function kernelCommandLine(spec: Pick<MicrovmSpec, "accel" | "tscKhz">): string {
  return [
    "console=ttyS0",
    "loglevel=5",
    "panic=-1",
    "pci=off",
    "random.trust_cpu=on",
    "mitigations=off",
    "cryptomgr.notests",
    ...(spec.accel === "tcg" && spec.tscKhz !== null ? [`tsc_early_khz=${spec.tscKhz}`] : []),
  ].join(" ");
}

function qemuArguments(spec: MicrovmSpec): string[] {
  const fd = (index: number) => `/proc/self/fd/${FIRST_FILE_FD + index}`;
  const args = [
    "-name",
    spec.name,
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-serial",
    "stdio",
    "-no-reboot",
    "-sandbox",
    "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
    "-machine",
    "microvm,pit=off,pic=off,rtc=on,isa-serial=on",
    "-accel",
    spec.accel === "kvm" ? "kvm" : "tcg,thread=multi,tb-size=512",
    "-cpu",
    spec.accel === "kvm" ? "host" : "max",
    "-m",
    `${Math.floor(spec.memoryBytes / 2 ** 20)}M`,
    "-smp",
    String(Math.max(1, Math.ceil(spec.vcpus))),
    "-kernel",
    fd(0),
    "-initrd",
    fd(1),
    "-append",
    kernelCommandLine(spec),
  ];
  spec.disks.forEach((disk, index) => {
    args.push(
      "-drive",
      `if=none,id=disk${index},file=${fd(2 + index)},format=raw,readonly=${disk.readOnly ? "on" : "off"},discard=ignore`,
      "-device",
      `virtio-blk-device,drive=disk${index},serial=${disk.serial}`,
    );
  });
  args.push("-device", "virtio-serial-device,max_ports=4");
  for (const [index, port] of ["control", "output"].entries()) {
    args.push(
      "-chardev",
      `socket,id=${port},fd=${3 + index}`,
      "-device",
      `virtserialport,chardev=${port},name=kiln.${port}`,
    );
  }
  return args;
}

/** Starts the VM; the caller owns it from then on (it must await `exited`). */
export async function launchMicrovm(spec: MicrovmSpec): Promise<RunningMicrovm> {
  const files = [
    await open(spec.kernel, "r"),
    await open(spec.initramfs, "r"),
    ...(await Promise.all(spec.disks.map((disk) => open(disk.path, disk.readOnly ? "r" : "r+")))),
  ];
  const maxFd = FIRST_FILE_FD + files.length - 1;
  const jail = [
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
    "--setenv",
    "PATH",
    "/usr/bin",
    ...(await systemBinds()),
    "--ro-bind-try",
    "/etc/ld.so.cache",
    "/etc/ld.so.cache",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    ...(spec.accel === "kvm" ? ["--dev-bind", "/dev/kvm", "/dev/kvm"] : []),
    "--tmpfs",
    "/tmp",
    "--remount-ro",
    "/",
  ];
  let child: ChildProcess;
  try {
    child = spawn(
      "setpriv",
      [
        "--pdeathsig=KILL",
        "--",
        "unshare",
        "--pid",
        "--fork",
        "--kill-child=KILL",
        "--",
        "bash",
        "-c",
        LAUNCHER,
        "kiln-microvm",
        String(maxFd),
        ...spec.procsFiles,
        "--",
        "setpriv",
        `--reuid=${spec.user.uid}`,
        `--regid=${spec.user.gid}`,
        ...(spec.kvmGroup === null ? ["--clear-groups"] : [`--groups=${spec.kvmGroup}`]),
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--pdeathsig=KILL",
        "--",
        spec.bwrapPath,
        ...jail,
        "--",
        spec.qemuPath,
        ...qemuArguments(spec),
      ],
      {
        stdio: ["ignore", "pipe", "pipe", "pipe", "pipe", ...files.map((f) => f.fd)],
        env: { PATH: LAUNCHER_PATH },
      },
    );
  } finally {
    // The child holds its own copies (or never started): the agent's go now.
    await Promise.all(files.map((f) => f.close()));
  }
  const stdio = child.stdio as unknown as (Readable | null)[];
  let tail = "";
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-4000);
  };
  stdio[1]?.on("data", keep);
  stdio[2]?.on("data", keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((done) => {
    child.once("exit", (code, signal) => done({ code, signal }));
    child.once("error", (error) => done({ code: null, signal: null, error }));
  });
  for (const stream of stdio) stream?.on("error", () => undefined);
  return {
    control: stdio[3] as unknown as Readable & Writable,
    output: stdio[4] as Readable,
    consoleTail: () => tail.trim(),
    exited,
    kill: () => {
      void killLauncher(child);
    },
  };
}
