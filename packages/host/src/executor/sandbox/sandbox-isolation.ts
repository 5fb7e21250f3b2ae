import { execFile } from "node:child_process";
import { constants } from "node:fs";
import { access } from "node:fs/promises";
import { promisify } from "node:util";
import { type Clock, systemClock } from "@kiln/contract";
import type { Executor } from "../executor.js";
import type { HostIsolation, InitializationStep, IsolationChoice } from "../host-isolation.js";
import type { ToolchainOptions } from "../shared/admit-toolchains.js";
import { attemptHousekeeping } from "../shared/attempt-housekeeping.js";
import { collectArtifacts } from "../shared/collect-artifacts.js";
import { ensureSandboxUser } from "../shared/ensure-sandbox-user.js";
import { cgroupDelegationStep, sandboxUserStep, toolchainsStep } from "../shared/initialization-steps.js";
import { releaseKeptDisksUnder } from "../shared/kept-target-disk.js";
import { withTargetTree } from "../shared/target-disk.js";
import { createSandboxExecutor, SANDBOX_DEFAULTS, type SandboxExecutorOptions } from "./sandbox-executor.js";

const run = promisify(execFile);

export interface SandboxIsolationOptions extends SandboxExecutorOptions {
  /** Why the host serves with the sandbox (default: the host was started with it). */
  readonly choice?: IsolationChoice;
  readonly toolchains?: ToolchainOptions;
  readonly clock?: Clock;
  /** Replaces the executor (tests: an in-memory one); the host-side parts stay the sandbox's. */
  readonly executor?: Executor;
}

/** The host isolation of bubblewrap + cgroups + seccomp on the host's kernel (docs/isolation.md). */
export function sandboxIsolation(options: SandboxIsolationOptions = {}): HostIsolation {
  const userName = options.sandboxUser ?? SANDBOX_DEFAULTS.sandboxUser;
  const cgroupParentName = options.cgroupParentName ?? SANDBOX_DEFAULTS.cgroupParentName;
  const keptDiskRoot = options.keptDiskRoot ?? SANDBOX_DEFAULTS.keptDiskRoot;
  return {
    choice: options.choice ?? {
      isolation: "sandbox",
      requested: "sandbox",
      reason: "sandbox: the host was started with it",
    },
    executor: options.executor ?? createSandboxExecutor(options),
    // The target dir is an ext4 image the host's own kernel mounted for the job: a read-only mount of it.
    withTargetFiles: (targetDir, patterns, limit, use) =>
      withTargetTree(targetDir, async (tree) => use(await collectArtifacts(tree, patterns, limit)), keptDiskRoot),
    releaseKeptDisks: (dirs) => releaseKeptDisksUnder(dirs, keptDiskRoot),
    ...attemptHousekeeping(cgroupParentName, options.clock ?? systemClock),
    initializationSteps: [
      sandboxUserStep(userName),
      bubblewrapStep(userName, options.bwrapPath ?? SANDBOX_DEFAULTS.bwrapPath),
      cgroupDelegationStep(cgroupParentName),
      toolchainsStep(options.toolchains),
    ],
  };
}

/** `bubblewrap`: installed, and it starts a sandbox as the sandbox user (a kernel refusing user namespaces fails here). */
function bubblewrapStep(userName: string, bwrapPath: string): InitializationStep {
  return {
    name: "bubblewrap",
    async run() {
      await access(bwrapPath, constants.X_OK).catch(() => {
        throw new Error(`bubblewrap is not installed at ${bwrapPath} (Debian package "bubblewrap")`);
      });
      const { stdout } = await run(bwrapPath, ["--version"], { timeout: 10_000 });
      const user = await ensureSandboxUser(userName);
      // Usable, not only present: a sandbox with every namespace bubblewrap makes, as the
      // sandbox user, runs /bin/true.
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
  };
}
