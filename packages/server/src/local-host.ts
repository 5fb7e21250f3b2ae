import { availableParallelism } from "node:os";
import { join } from "node:path";
import type { Clock, Logger, LoopFailure } from "@kiln/contract";
import {
  DEFAULT_CRATES_IO_INDEX,
  type GatewayEgressSettings,
  type HostEvent,
  type HostIsolation,
  startMachineHost,
} from "@kiln/host";
import type { BlobStore, JobNotifications, Storage } from "@kiln/storage";
import { HostService, type HostServiceEvent } from "./domain/hosts/host-service.js";
import { startLeaseReaper } from "./domain/scheduler/lease-reaper.js";
import type { SecretBox } from "./domain/secrets/secret-box.js";
import { inProcessHostProtocol } from "./web/host-protocol/in-process-host-protocol.js";

export interface LocalHostOptions {
  readonly hostId?: string;
  /** Where attempt directories live (removed after each attempt). */
  readonly workRoot: string;
  /**
   * Where warm lineages live (default `<workRoot>/../lineages`: beside the work root, so that
   * handing one to an attempt is a rename() on one file system); null turns lineages off.
   */
  readonly lineageRoot?: string | null;
  /**
   * vCPU slots the host offers: by default the machine's (availableParallelism), so the fleet
   * view and placement say what the machine has; a size larger than that is not placed here.
   */
  readonly vcpus?: number;
  /** How attempts are isolated (default: the sandbox; main.ts chooses by KILN_EXECUTOR). */
  readonly isolation?: HostIsolation;
  readonly heartbeatSeconds?: number;
  /**
   * Where attempts' workspaces and homes are made (default: chooseScratchRoot, a directory on
   * /dev/shm when it is tmpfs; null keeps them in the attempt directory).
   */
  readonly scratchRoot?: string | null;
  /**
   * The dependency gateway's crate cache (default `<workRoot>/../crates`, so a cached crate is
   * hard-linked into an attempt on one file system) and the index standing for crates.io.
   */
  readonly crateCache?: { readonly root?: string; readonly maxBytes?: number; readonly cratesIoIndex: string };
  /** The gateway's egress allowances and extra CAs (config.ts `gateway`); default none. */
  readonly gateway?: GatewayEgressSettings;
  /** Hears every failure of the host and the control plane's host-side loops (tests assert them). */
  readonly onEvent?: (event: LocalHostEvent) => void;
}

/** What the embedded host, its host service and its lease reaper report besides logging it. */
export type LocalHostEvent = HostEvent | HostServiceEvent | LoopFailure;

/**
 * The embedded default: one local host running beside the server, speaking the host
 * protocol in-process, plus the lease reaper that hands lost attempts back to the queue.
 */
export async function startLocalHost(
  deps: {
    storage: Storage;
    blobs: BlobStore;
    clock: Clock;
    log: Logger;
    storageQuotaBytes?: number;
    secrets?: SecretBox;
    lineageAffinitySeconds?: number;
    /**
     * Wakes the host's claim when a job becomes claimable through any server process (a
     * submission through another kiln-server, a job handed back by a lease reaper elsewhere, a
     * tenant's slot freed, a drain lifted); without it, or while notices do not arrive, the host's
     * own claim poll finds the job.
     */
    notifications?: JobNotifications;
  },
  options: LocalHostOptions,
): Promise<{ wake: () => void; stop: () => Promise<void> }> {
  const onEvent = options.onEvent ?? (() => {});
  const service = new HostService({ ...deps, onEvent });
  const machine = await startMachineHost({
    hostId: options.hostId ?? "local",
    protocol: inProcessHostProtocol(service),
    clock: deps.clock,
    log: deps.log,
    onEvent,
    workRoot: options.workRoot,
    lineageRoot:
      options.lineageRoot === null ? null : (options.lineageRoot ?? join(options.workRoot, "..", "lineages")),
    ...(options.scratchRoot === undefined ? {} : { scratchRoot: options.scratchRoot }),
    crateCache: {
      root: options.crateCache?.root ?? join(options.workRoot, "..", "crates"),
      cratesIoIndex: options.crateCache?.cratesIoIndex ?? DEFAULT_CRATES_IO_INDEX,
      ...(options.crateCache?.maxBytes === undefined ? {} : { maxBytes: options.crateCache.maxBytes }),
    },
    ...(options.gateway === undefined ? {} : { gatewayEgress: options.gateway.egress }),
    ...(options.gateway?.extraCa === undefined ? {} : { gatewayCa: options.gateway.extraCa }),
    vcpus: options.vcpus ?? availableParallelism(),
    ...(options.heartbeatSeconds === undefined ? {} : { heartbeatSeconds: options.heartbeatSeconds }),
    ...(options.isolation === undefined ? {} : { isolation: options.isolation }),
  });
  const reaper = startLeaseReaper({
    storage: deps.storage,
    clock: deps.clock,
    log: deps.log,
    onReclaimed: () => machine.agent.wake(),
    onFailure: onEvent,
  });
  // A job queued, a tenant's slot freed, a drain lifted — by any server process — claims at once.
  const unsubscribeQueued = deps.notifications?.onClaimable(() => machine.agent.wake()) ?? (() => {});
  return {
    wake: () => machine.agent.wake(),
    stop: async () => {
      unsubscribeQueued();
      await reaper.stop();
      await machine.stop();
    },
  };
}
