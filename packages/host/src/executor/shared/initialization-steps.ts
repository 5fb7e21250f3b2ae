import type { InitializationStep } from "../host-isolation.js";
import { listAdmittedToolchains, resolveToolchain, type ToolchainOptions } from "./admit-toolchains.js";
import { AttemptCgroup } from "./attempt-cgroup.js";
import { describeCgroupLayout, detectCgroupLayout, readOwnCgroups } from "./cgroup-layout.js";
import { ensureSandboxUser } from "./ensure-sandbox-user.js";

/**
 * The initialization steps every isolation's host runs (each isolation adds its own: bubblewrap
 * for the sandbox, KVM, QEMU and the guest images for the microVM). Each resolves with what it
 * found (the receipt's detail) or throws saying what is missing. Tests may stand in for a step
 * only where this machine cannot have it; kiln's own tests run the real ones.
 */

/** `sandbox_user`: the unprivileged host user attempts run as (the sandbox's job, the microVM's QEMU), created when missing. */
export function sandboxUserStep(userName: string): InitializationStep {
  return {
    name: "sandbox_user",
    async run() {
      const user = await ensureSandboxUser(userName);
      return `sandbox user ${user.name} (uid ${user.uid}, gid ${user.gid})`;
    },
  };
}

/** `cgroup_delegation`: an attempt cgroup can be made under the host's cgroup parent with cpu, memory and pids limits. */
export function cgroupDelegationStep(cgroupParentName: string): InitializationStep {
  return {
    name: "cgroup_delegation",
    async run(order) {
      const layout = await detectCgroupLayout();
      const cgroup = await AttemptCgroup.create({
        layout,
        ownCgroups: await readOwnCgroups(),
        parentName: cgroupParentName,
        attemptId: `init-probe-${order.operation}`,
        limits: { vcpus: 1, memoryBytes: 256 * 2 ** 20, pids: 64, diskBytes: 2 ** 30 },
      });
      const enforced = cgroup.enforced;
      const failures = await cgroup.remove();
      const missing = (["cpu", "memory", "pids"] as const).filter((limit) => !enforced[limit]);
      const layoutText = describeCgroupLayout(layout);
      if (missing.length > 0) {
        throw new Error(
          `${layoutText}: the kernel does not hold the ${missing.join(", ")} limit(s) of an attempt cgroup`,
        );
      }
      if (failures.length > 0)
        throw new Error(`${layoutText}: the probe cgroup could not be removed: ${failures.join("; ")}`);
      return `${layoutText}; an attempt cgroup held cpu, memory and pids limits and was removed`;
    },
  };
}

/** `toolchains`: every requested rustup toolchain is installed and admitted (all admitted ones listed when none is named). */
export function toolchainsStep(options: ToolchainOptions = {}): InitializationStep {
  return {
    name: "toolchains",
    async run(order) {
      const requested = order.toolchains;
      const admitted = await listAdmittedToolchains(options);
      if (requested.length === 0) {
        if (admitted.length === 0) throw new Error("no rustup toolchain is installed; a job could not build");
        return `admitted: ${admitted.map((t) => `${t.name} (${t.version ?? "version unknown"})`).join(", ")}`;
      }
      // Throws ToolchainNotAdmittedError naming what is admitted for the first missing one.
      const resolved = requested.map((name) => resolveToolchain(name, admitted));
      return `admitted: ${resolved.map((t, i) => `${requested[i]} → ${t.name} (${t.version ?? "version unknown"})`).join(", ")}`;
    },
  };
}
