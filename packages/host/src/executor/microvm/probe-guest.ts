import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { access, chmod, chown, readFile, stat } from "node:fs/promises";
import { promisify } from "node:util";
import { messageOf } from "@kiln/contract";
import { AttemptCgroup } from "../shared/attempt-cgroup.js";
import { detectCgroupLayout, readOwnCgroups } from "../shared/cgroup-layout.js";
import type { SandboxUser } from "../shared/ensure-sandbox-user.js";
import { encodeRequest, GuestLineReader } from "./guest-channel.js";
import type { GuestImages } from "./guest-images.js";
import { hostTscKhz, launchMicrovm } from "./launch-microvm.js";

const run = promisify(execFile);

/**
 * QEMU runs as the unprivileged sandbox user, who may open /dev/kvm only through its group:
 * Debian's udev rule makes it `root:kvm 0660`; a host without that rule (a container, this
 * project's machines: `root:root 0600`) gets the same here — the group made if missing, the
 * device given to it. Returns the group's id, QEMU's one supplementary group.
 */
export async function kvmGroupAccess(): Promise<number> {
  let group = await kvmGroupId();
  if (group === null) {
    await run("groupadd", ["--system", "kvm"]);
    group = await kvmGroupId();
    if (group === null) throw new Error("groupadd made no kvm group");
  }
  const device = await stat("/dev/kvm");
  if (device.gid !== group) await chown("/dev/kvm", device.uid, group);
  if ((device.mode & 0o060) !== 0o060) await chmod("/dev/kvm", (device.mode & 0o7777) | 0o060);
  return group;
}

async function kvmGroupId(): Promise<number | null> {
  const groups = await readFile("/etc/group", "utf8").catch(() => "");
  const line = groups.split("\n").find((l) => l.startsWith("kvm:"));
  const id = line?.split(":")[2];
  return id === undefined ? null : Number(id);
}

export type ProbeResult =
  | { readonly booted: true; readonly milliseconds: number; readonly kernelRelease: string }
  | { readonly booted: false; readonly reason: string };

/**
 * Boots a probe guest — the guest kernel and the agent's initramfs, no disks, 256 MiB — and
 * waits for its agent to answer a probe request, at most `timeoutMs`; the VM is killed then,
 * whatever it was doing. This is what `auto` asks before it serves with microVMs: a host whose
 * /dev/kvm exists but does not boot a stock kernel (nested or paravirtual KVM: this project's
 * own machines hang after "Probing EDD") must fall back within a bounded time, not at its first
 * job. Under `tcg` it proves the same chain without hardware virtualization.
 */
export async function probeGuest(options: {
  readonly images: GuestImages;
  readonly accel: "kvm" | "tcg";
  readonly qemuPath: string;
  readonly bwrapPath: string;
  readonly user: SandboxUser;
  readonly cgroupParentName: string;
  readonly timeoutMs: number;
}): Promise<ProbeResult> {
  const { accel } = options;
  const executable = await access(options.qemuPath, constants.X_OK).then(
    () => true,
    () => false,
  );
  if (!executable)
    return { booted: false, reason: `QEMU is not installed at ${options.qemuPath} (Debian package qemu-system-x86)` };
  if (accel === "kvm") {
    const device = await stat("/dev/kvm").catch(() => null);
    if (device === null) return { booted: false, reason: "this host has no /dev/kvm (no hardware virtualization)" };
    try {
      await kvmGroupAccess();
    } catch (error) {
      return { booted: false, reason: `/dev/kvm could not be opened to the kvm group: ${messageOf(error)}` };
    }
  }
  let kernel: string;
  let initramfs: string;
  try {
    const built = await options.images.ensureKernel();
    const release = built.name.replace(/^kernel /, "");
    kernel = `${built.path}/vmlinuz`;
    initramfs = (await options.images.ensureInitramfs(built.path, release)).path;
  } catch (error) {
    return {
      booted: false,
      reason: `the guest kernel or initramfs could not be made: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  const cgroup = await AttemptCgroup.create({
    layout: await detectCgroupLayout(),
    ownCgroups: await readOwnCgroups(),
    parentName: options.cgroupParentName,
    attemptId: `probe-${randomBytes(4).toString("hex")}`,
    limits: { vcpus: 1, memoryBytes: 1024 * 2 ** 20, pids: 64, diskBytes: 2 ** 30 },
  }).catch(() => null);
  const started = Date.now();
  try {
    const vm = await launchMicrovm({
      name: "kiln-probe",
      qemuPath: options.qemuPath,
      bwrapPath: options.bwrapPath,
      accel,
      vcpus: 1,
      memoryBytes: 256 * 2 ** 20,
      kernel,
      initramfs,
      disks: [],
      user: options.user,
      kvmGroup: accel === "kvm" ? await kvmGroupAccess() : null,
      procsFiles: cgroup?.procsFiles ?? [],
      tscKhz: await hostTscKhz(),
    });
    let release: string | null = null;
    const answered = new Promise<void>((resolve) => {
      const reader = new GuestLineReader((line) => {
        if (line.kind === "hello") vm.control.write(encodeRequest([["probe", "1"]]));
        if (line.kind === "probed") {
          release = line.kernelRelease;
          resolve();
        }
      });
      vm.control.on("data", (chunk: Buffer) => reader.push(chunk));
    });
    const timer = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), options.timeoutMs).unref());
    const first = await Promise.race([
      answered.then(() => "answered" as const),
      vm.exited.then(() => "exited" as const),
      timer,
    ]);
    const milliseconds = Date.now() - started;
    vm.kill();
    await cgroup?.killAll();
    await vm.exited;
    if (first === "answered" && release !== null) return { booted: true, milliseconds, kernelRelease: release };
    const lastLines = vm.consoleTail().split("\n").slice(-3).join(" / ").slice(-300);
    return {
      booted: false,
      reason:
        first === "timeout"
          ? `${accel === "kvm" ? "KVM" : "TCG"} did not boot the probe guest within ${options.timeoutMs / 1000} s${lastLines === "" ? "" : ` (its console's last lines: ${lastLines})`}`
          : `${accel === "kvm" ? "KVM" : "TCG"} did not boot the probe guest: QEMU exited before it answered${lastLines === "" ? "" : ` (${lastLines})`}`,
    };
  } catch (error) {
    return {
      booted: false,
      reason: `QEMU could not start the probe guest: ${error instanceof Error ? error.message : String(error)}`,
    };
  } finally {
    await cgroup?.killAll();
    await cgroup?.remove();
  }
}
