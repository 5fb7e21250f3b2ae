import { rmdir } from "node:fs/promises";
import { totalmem } from "node:os";
import { join } from "node:path";
import { type Clock, type Logger, messageOf } from "@kiln/contract";
import { admitToolchain } from "../executor/admit-toolchains.js";
import type { Executor } from "../executor/executor.js";
import { reapStaleAttempts } from "../executor/reap-stale-attempts.js";
import { removeJobDirectories } from "../executor/remove-job-directories.js";
import { createSandboxExecutor } from "../executor/sandbox-executor.js";
import { DEFAULT_CRATE_CACHE_BYTES, DependencyGateway } from "../gateway/dependency-gateway.js";
import type { AttemptRunnerDeps } from "./attempt/attempt-context.js";
import { cargoOutputObserver } from "./cargo-output-observer.js";
import { HostAgent } from "./host-agent.js";
import type { HostEvent } from "./host-events.js";
import type { HostProtocol } from "./host-protocol.js";
import { realHostReads } from "./host-reads.js";
import { type InitializationChecks, realInitializationChecks } from "./initialization-checks.js";
import { LineageStore } from "./lineage-store.js";
import { chooseScratchRoot } from "./scratch-root.js";

/** What a host agent on a real machine is made of; the embedded host and `kiln-host` differ only in these. */
export interface MachineHostOptions {
  readonly hostId: string;
  readonly protocol: HostProtocol;
  readonly clock: Clock;
  readonly log: Logger;
  readonly onEvent?: (event: HostEvent) => void;
  /** Where attempt directories live (removed after each attempt). */
  readonly workRoot: string;
  /** Warm lineages' directory (beside the work root, so a hand-over is a rename); null: none. */
  readonly lineageRoot: string | null;
  /** Workspaces and homes (default chooseScratchRoot: /dev/shm when tmpfs); null: in the attempt directory. */
  readonly scratchRoot?: string | null;
  /** The dependency gateway's crate cache and the index standing for crates.io. */
  readonly crateCache: { readonly root: string; readonly maxBytes?: number; readonly cratesIoIndex: string };
  readonly vcpus: number;
  /**
   * KILN_MAX_ATTEMPT_DISK_BYTES: the most disk one attempt may take on this host, below its size's
   * quota (a host whose volume is small); the host claims only attempts its free disk covers.
   */
  readonly maxAttemptDiskBytes?: number;
  readonly memoryBytes?: number;
  readonly heartbeatSeconds?: number;
  readonly executor?: Executor;
  readonly resolveToolchain?: AttemptRunnerDeps["resolveToolchain"];
  /** Operator-started initializations' steps (default: the real checks of this machine). */
  readonly initializationChecks?: InitializationChecks;
  /** The directory operator.hosts.evidence reads files of; absent, the host keeps none. */
  readonly evidenceRoot?: string;
}

/**
 * A host agent wired with the machine's real parts — the sandbox executor, admitted rustup
 * toolchains, warm lineages, the scratch root, the dependency gateway, the reaper of stale
 * attempts — started, and a stop that also removes the host's scratch root.
 */
export async function startMachineHost(
  options: MachineHostOptions,
): Promise<{ agent: HostAgent; stop(): Promise<void> }> {
  const { workRoot, clock, log } = options;
  const scratchRoot = options.scratchRoot === null ? undefined : (options.scratchRoot ?? chooseScratchRoot(workRoot));
  const agent = new HostAgent({
    hostId: options.hostId,
    protocol: options.protocol,
    clock,
    reporting: { log, emit: options.onEvent ?? (() => {}) },
    executor:
      options.executor ??
      createSandboxExecutor(
        options.maxAttemptDiskBytes === undefined ? {} : { maxDiskBytes: options.maxAttemptDiskBytes },
      ),
    resolveToolchain: options.resolveToolchain ?? ((name) => admitToolchain(name)),
    newObserver: cargoOutputObserver,
    workRoot: join(workRoot),
    ...(scratchRoot === undefined ? {} : { scratchRoot }),
    removeDirectories: removeJobDirectories,
    gateway: new DependencyGateway({
      cacheRoot: options.crateCache.root,
      cacheMaxBytes: options.crateCache.maxBytes ?? DEFAULT_CRATE_CACHE_BYTES,
      cratesIoIndex: options.crateCache.cratesIoIndex,
      clock,
    }),
    ...(options.lineageRoot === null ? {} : { lineages: new LineageStore(options.lineageRoot) }),
    vcpus: options.vcpus,
    memoryBytes: options.memoryBytes ?? totalmem(),
    heartbeatSeconds: options.heartbeatSeconds ?? 2,
    initializationChecks: options.initializationChecks ?? realInitializationChecks(),
    hostReads: realHostReads({ evidenceRoot: options.evidenceRoot ?? null }),
    reapStale: () => reapStaleAttempts({ workRoot, ...(scratchRoot === undefined ? {} : { scratchRoot }) }),
  });
  await agent.start();
  return {
    agent,
    stop: async () => {
      await agent.stop();
      // Every attempt's scratch is removed by now; the host's own directory goes with it.
      if (scratchRoot !== undefined) {
        await rmdir(scratchRoot).catch((error: unknown) =>
          log.warn({ scratchRoot, err: error }, `the host's scratch root could not be removed: ${messageOf(error)}`),
        );
      }
    },
  };
}
