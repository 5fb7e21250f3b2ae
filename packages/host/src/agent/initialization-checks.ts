import { execFile } from "node:child_process";
import { constants } from "node:fs";
import { access } from "node:fs/promises";
import { promisify } from "node:util";
import {
  listAdmittedToolchains,
  resolveToolchain,
  type ToolchainOptions,
} from "../executor/shared/admit-toolchains.js";
import { AttemptCgroup } from "../executor/shared/attempt-cgroup.js";
import { describeCgroupLayout, detectCgroupLayout, readOwnCgroups } from "../executor/shared/cgroup-layout.js";
import { ensureSandboxUser } from "../executor/shared/ensure-sandbox-user.js";

const run = promisify(execFile);

/**
 * What an initialization checks and prepares on a host, one method per step. Each resolves with
 * what it found (the receipt's detail) or throws saying what is missing. Tests may stand in for
 * a step only where this machine cannot have it; kiln's own tests run the real ones.
 */
export interface InitializationChecks {
  /** The unprivileged sandbox user exists (created when missing). */
  sandboxUser(): Promise<string>;
  /** bubblewrap is installed and starts a sandbox as the sandbox user. */
  bubblewrap(): Promise<string>;
  /** The attempt cgroup can be made under the host's cgroup parent with cpu, memory and pids limits. */
  cgroupDelegation(probeName: string): Promise<string>;
  /** Every requested rustup toolchain is installed and admitted. */
  toolchains(requested: readonly string[]): Promise<string>;
}

export interface InitializationCheckOptions extends ToolchainOptions {
  /** Default `kiln-sandbox`, as the sandbox executor uses. */
  readonly sandboxUser?: string;
  /** Default /usr/bin/bwrap. */
  readonly bwrapPath?: string;
  /** Default `kiln`, the parent cgroup of every attempt. */
  readonly cgroupParentName?: string;
}

/** The real checks, through the same code the sandbox executor runs attempts with. */
export function realInitializationChecks(options: InitializationCheckOptions = {}): InitializationChecks {
  const userName = options.sandboxUser ?? "kiln-sandbox";
  const bwrapPath = options.bwrapPath ?? "/usr/bin/bwrap";
  return {
    async sandboxUser() {
      const user = await ensureSandboxUser(userName);
      return `sandbox user ${user.name} (uid ${user.uid}, gid ${user.gid})`;
    },
    async bubblewrap() {
      await access(bwrapPath, constants.X_OK).catch(() => {
        throw new Error(`bubblewrap is not installed at ${bwrapPath} (Debian package "bubblewrap")`);
      });
      const { stdout } = await run(bwrapPath, ["--version"], { timeout: 10_000 });
      const user = await ensureSandboxUser(userName);
      // Usable, not only present: a sandbox with every namespace bubblewrap makes, as the
      // sandbox user, runs /bin/true. A kernel that refuses unprivileged user namespaces fails here.
      await run(
        "setpriv",
        [
          `--reuid=${user.uid}`,
          `--regid=${user.gid}`,
          "--clear-groups",
          bwrapPath,
          "--unshare-all",
          "--die-with-parent",
          "--ro-bind",
          "/",
          "/",
          "/bin/true",
        ],
        { timeout: 30_000 },
      ).catch((error: unknown) => {
        const stderr = String((error as { stderr?: unknown }).stderr ?? "").trim();
        throw new Error(`bubblewrap could not start a sandbox as ${user.name}: ${stderr || String(error)}`);
      });
      return `${stdout.trim()} at ${bwrapPath} started a sandbox as ${user.name} (user, mount, pid, network, ipc, uts and cgroup namespaces)`;
    },
    async cgroupDelegation(probeName) {
      const layout = await detectCgroupLayout();
      const cgroup = await AttemptCgroup.create({
        layout,
        ownCgroups: await readOwnCgroups(),
        parentName: options.cgroupParentName ?? "kiln",
        attemptId: probeName,
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
    async toolchains(requested) {
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
