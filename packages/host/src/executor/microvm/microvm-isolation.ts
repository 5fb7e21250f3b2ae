import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { type Clock, systemClock } from "@kiln/contract";
import type { HostIsolation, InitializationStep, IsolationChoice } from "../host-isolation.js";
import { listAdmittedToolchains, resolveToolchain, type ToolchainOptions } from "../shared/admit-toolchains.js";
import { attemptHousekeeping } from "../shared/attempt-housekeeping.js";
import { ensureSandboxUser } from "../shared/ensure-sandbox-user.js";
import { cgroupDelegationStep, sandboxUserStep, toolchainsStep } from "../shared/initialization-steps.js";
import { withTargetDiskFiles } from "./guest-disks.js";
import { GuestImages } from "./guest-images.js";
import { MICROVM_DEFAULTS, MicrovmExecutor, type MicrovmExecutorOptions } from "./microvm-executor.js";
import { probeGuest } from "./probe-guest.js";

const run = promisify(execFile);

export interface MicrovmIsolationOptions extends Omit<MicrovmExecutorOptions, "images"> {
  /** Where the guest's kernel, initramfs and images are kept (`<data dir>/guest`). */
  readonly guestDirectory: string;
  /** The Debian mirror the guest root is installed from. */
  readonly mirror?: string;
  /** Why the host serves with microVMs (default: the host was started with it). */
  readonly choice?: IsolationChoice;
  /** What the guest image builds say as they go (they take minutes, once). */
  readonly log?: (line: string) => void;
  readonly toolchains?: ToolchainOptions;
  readonly clock?: Clock;
  /** The guest's images, when the caller made them already (the host's selection probed with them). */
  readonly images?: GuestImages;
}

export interface MicrovmHostIsolation extends HostIsolation {
  readonly executor: MicrovmExecutor;
  readonly images: GuestImages;
}

/** The host isolation of one QEMU microVM per attempt (docs/isolation.md). */
export function microvmIsolation(options: MicrovmIsolationOptions): MicrovmHostIsolation {
  const images =
    options.images ??
    new GuestImages({
      directory: options.guestDirectory,
      ...(options.mirror === undefined ? {} : { mirror: options.mirror }),
      ...(options.log === undefined ? {} : { log: options.log }),
    });
  const executor = new MicrovmExecutor({ ...options, images });
  const userName = options.sandboxUser ?? MICROVM_DEFAULTS.sandboxUser;
  const cgroupParentName = options.cgroupParentName ?? MICROVM_DEFAULTS.cgroupParentName;
  const qemuPath = options.qemuPath ?? MICROVM_DEFAULTS.qemuPath;
  const accel = options.accel;
  const steps: InitializationStep[] = [
    sandboxUserStep(userName),
    {
      name: "qemu",
      async run() {
        const { stdout } = await run(qemuPath, ["-version"], { timeout: 10_000 }).catch(() => {
          throw new Error(`QEMU is not installed at ${qemuPath} (Debian package qemu-system-x86)`);
        });
        const { stdout: machines } = await run(qemuPath, ["-machine", "help"], { timeout: 10_000 });
        if (!/^microvm\b/m.test(machines)) throw new Error(`${stdout.split("\n")[0]} has no microvm machine type`);
        return `${stdout.split("\n")[0]} at ${qemuPath}, with the microvm machine type`;
      },
    },
    {
      name: "guest_kernel",
      async run() {
        const kernel = await images.ensureKernel();
        return `${kernel.name} ${kernel.built ? "taken from Debian's package now" : "present"} (${kernel.path})`;
      },
    },
    {
      name: "guest_image",
      async run() {
        const { artifacts } = await images.ensureBoot();
        return artifacts.map((a) => `${a.name}: ${a.built ? "built now" : "present"} (${a.path})`).join("; ");
      },
    },
    {
      name: accel === "kvm" ? "kvm" : "accelerator",
      async run() {
        const probe = await probeGuest({
          images,
          accel,
          qemuPath,
          bwrapPath: options.bwrapPath ?? MICROVM_DEFAULTS.bwrapPath,
          user: await ensureSandboxUser(userName),
          cgroupParentName,
          timeoutMs: (accel === "kvm" ? 10 : 300) * 1000,
        });
        if (!probe.booted) throw new Error(probe.reason);
        return `${accel === "kvm" ? "KVM" : "TCG (software emulation, as configured)"} booted a probe guest (kernel ${probe.kernelRelease}) in ${probe.milliseconds} ms`;
      },
    },
    cgroupDelegationStep(cgroupParentName),
    toolchainsStep(options.toolchains),
    {
      name: "toolchain_images",
      async run(order) {
        const admitted = await listAdmittedToolchains(options.toolchains);
        const chosen =
          order.toolchains.length === 0 ? admitted : order.toolchains.map((n) => resolveToolchain(n, admitted));
        const made = [];
        for (const toolchain of chosen) made.push(await images.ensureToolchain(toolchain));
        return made.map((a) => `${a.name}: ${a.built ? "built now" : "present"}`).join("; ");
      },
    },
  ];
  return {
    choice: options.choice ?? {
      isolation: "microvm",
      requested: "microvm",
      reason: `microvm: the host was started with it (${accel === "kvm" ? "KVM" : "TCG: software emulation, no hardware virtualization"})`,
    },
    executor,
    images,
    // The target disk is the guest's: read with debugfs as the sandbox user, never mounted on the host.
    withTargetFiles: async (targetDir, patterns, limit, use) =>
      withTargetDiskFiles(targetDir, patterns, limit, await ensureSandboxUser(userName), use),
    ...attemptHousekeeping(cgroupParentName, options.clock ?? systemClock),
    initializationSteps: steps,
  };
}
