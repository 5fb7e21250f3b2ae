import { rmdir } from "node:fs/promises";
import { totalmem } from "node:os";
import { join } from "node:path";
import { type Clock, type Logger, messageOf } from "@kiln/contract";
import type { HostIsolation } from "../executor/host-isolation.js";
import { sandboxIsolation } from "../executor/sandbox/sandbox-isolation.js";
import { admitToolchain, admittedToolchainNames, listAdmittedToolchains } from "../executor/shared/admit-toolchains.js";
import { DEFAULT_CRATE_CACHE_BYTES, type GatewayEgress } from "../gateway/dependency-gateway.js";
import { WorkerGateway } from "../gateway/worker-gateway.js";
import type { AttemptRunnerDeps } from "./attempt/attempt-context.js";
import { cargoOutputObserver } from "./cargo-output-observer.js";
import { HostAgent } from "./host-agent.js";
import type { HostEvent } from "./host-events.js";
import type { HostProtocol } from "./host-protocol.js";
import { realHostReads } from "./host-reads.js";
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
  /** The dependency gateway's egress allowances (gatewayEgressOf: KILN_GATEWAY_*); default none. */
  readonly gatewayEgress?: GatewayEgress;
  /** Certificate authorities (PEM) the gateway trusts besides the system's (KILN_GATEWAY_CA_FILE). */
  readonly gatewayCa?: string;
  readonly vcpus: number;
  readonly memoryBytes?: number;
  readonly heartbeatSeconds?: number;
  /** How attempts are isolated (default: the sandbox; `selectHostIsolation` chooses per KILN_EXECUTOR). */
  readonly isolation?: HostIsolation;
  readonly resolveToolchain?: AttemptRunnerDeps["resolveToolchain"];
  /** The directory operator.hosts.evidence reads files of; absent, the host keeps none. */
  readonly evidenceRoot?: string;
}

/**
 * A host agent wired with the machine's real parts — its isolation (the sandbox's or the
 * microVM's executor, reaping, initialization steps), admitted rustup toolchains, warm lineages,
 * the scratch root, the dependency gateway — started, and a stop that also removes the host's
 * scratch root.
 */
export async function startMachineHost(
  options: MachineHostOptions,
): Promise<{ agent: HostAgent; stop(): Promise<void> }> {
  const { workRoot, clock, log } = options;
  const scratchRoot = options.scratchRoot === null ? undefined : (options.scratchRoot ?? chooseScratchRoot(workRoot));
  // Each attempt's fetch phase in a worker process of its own (worker-gateway.ts), in a cgroup
  // beside the attempts' where the host has cgroups.
  const gateway = new WorkerGateway({
    config: {
      cacheRoot: options.crateCache.root,
      cacheMaxBytes: options.crateCache.maxBytes ?? DEFAULT_CRATE_CACHE_BYTES,
      cratesIoIndex: options.crateCache.cratesIoIndex,
      ...(options.gatewayEgress === undefined ? {} : { egress: options.gatewayEgress }),
      ...(options.gatewayCa === undefined ? {} : { extraCa: options.gatewayCa }),
    },
    cgroupParentName: "kiln",
  });
  gateway.prepare();
  const agent = new HostAgent({
    hostId: options.hostId,
    protocol: options.protocol,
    clock,
    reporting: { log, emit: options.onEvent ?? (() => {}) },
    // KILN_MAX_ATTEMPT_DISK_BYTES reaches the executor through the isolation's settings (select-isolation.ts).
    isolation: options.isolation ?? sandboxIsolation({ clock }),
    resolveToolchain: options.resolveToolchain ?? ((name) => admitToolchain(name)),
    // The installed toolchains are advertised only where they are what attempts resolve against.
    ...(options.resolveToolchain === undefined
      ? { toolchainNames: async () => admittedToolchainNames(await listAdmittedToolchains()) }
      : {}),
    newObserver: cargoOutputObserver,
    workRoot: join(workRoot),
    ...(scratchRoot === undefined ? {} : { scratchRoot }),
    gateway,
    ...(options.lineageRoot === null ? {} : { lineages: new LineageStore(options.lineageRoot) }),
    vcpus: options.vcpus,
    memoryBytes: options.memoryBytes ?? totalmem(),
    heartbeatSeconds: options.heartbeatSeconds ?? 2,
    fleet: true,
    hostReads: realHostReads({ evidenceRoot: options.evidenceRoot ?? null }),
    reapStale: true,
  });
  await agent.start();
  return {
    agent,
    stop: async () => {
      await agent.stop();
      gateway.close();
      // Every attempt's scratch is removed by now; the host's own directory goes with it (a host
      // that ran no attempt never made it: nothing to say then).
      if (scratchRoot !== undefined) {
        await rmdir(scratchRoot).catch((error: unknown) =>
          (error as NodeJS.ErrnoException).code === "ENOENT"
            ? undefined
            : log.warn(
                { scratchRoot, err: error },
                `the host's scratch root could not be removed: ${messageOf(error)}`,
              ),
        );
      }
    },
  };
}
