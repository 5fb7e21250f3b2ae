import { join } from "node:path";
import type { Clock } from "@kiln/contract";
import type { AdmittedToolchain } from "../../executor/executor.js";
import type { HostIsolation } from "../../executor/host-isolation.js";
import type { DependencyProvider } from "../../gateway/worker-gateway.js";
import { type OutputObserver, PhaseClock } from "../attempt-evidence.js";
import type { CredentialHolds } from "../credential-holds.js";
import type { HostReporting } from "../host-events.js";
import type { AttemptRef, HostProtocol, Placement } from "../host-protocol.js";
import type { LineageStore } from "../lineage-store.js";
import { LogShipper } from "./log-shipper.js";

export interface AttemptRunnerDeps {
  readonly hostId: string;
  readonly protocol: HostProtocol;
  /** How attempts are isolated on this host: the executor and everything host-side that depends on it. */
  readonly isolation: HostIsolation;
  readonly clock: Clock;
  readonly reporting: HostReporting;
  /** Resolves an admitted toolchain, or throws an Error whose message names the admitted ones. */
  readonly resolveToolchain: (name: string) => Promise<AdmittedToolchain>;
  readonly newObserver: (attempt: number) => OutputObserver;
  /** Where attempt directories are made; each attempt gets its own and it is removed after. */
  readonly workRoot: string;
  /**
   * Where each attempt's workspace and cargo home are made instead, when set: a memory-backed
   * file system (scratch-root.ts). They are small, written once and thrown away, and on a disk
   * every new inode costs (a busy ext4 scans past recently deleted ones for each); the target
   * dir stays under the work root, beside the lineages it is renamed to and from.
   */
  readonly scratchRoot?: string;
  /**
   * Takes over the removal of a finished attempt's directory so the attempt can return (and
   * the agent free its vCPUs for the next placement) without waiting on the disk; without it
   * the removal is awaited.
   */
  readonly inBackground?: (work: Promise<void>) => void;
  /** Warm lineages on this host; without it every attempt starts from an empty target dir. */
  readonly lineages?: LineageStore;
  readonly heartbeatSeconds?: number;
  /** Most bytes of raw cargo output retained per attempt. */
  readonly cargoOutputLimit?: number;
  /**
   * Provides a `dependency-gateway` job's locked packages; without it such a job fails in its
   * fetch phase saying the host has no gateway.
   */
  readonly gateway?: DependencyProvider;
  /** Registry credential versions this host's attempts hold (the agent acknowledges from it). */
  readonly credentialHolds?: CredentialHolds;
}

/** Host paths of one attempt: its own directory (target dir) and, on the scratch root, workspace and home. */
export interface AttemptDirectories {
  readonly base: string;
  readonly scratch: string;
  readonly workspace: string;
  readonly home: string;
}

/**
 * What every phase of one attempt shares: the placement, its lease reference, its directories,
 * its log, its phase timings and the abort that cancellation or a lost lease triggers.
 */
export class AttemptContext {
  readonly ref: AttemptRef;
  readonly attemptId: string;
  readonly dirs: AttemptDirectories;
  readonly logs: LogShipper;
  readonly phases: PhaseClock;
  readonly abort = new AbortController();
  /** Set when the heartbeat was answered `cancel`. */
  cancelled = false;
  /** When the job's wall-clock ceiling started counting (ms), once started. */
  #ceilingStartedMs: number | null = null;

  constructor(
    readonly deps: AttemptRunnerDeps,
    readonly placement: Placement,
  ) {
    this.ref = { jobId: placement.jobId, attempt: placement.attempt, leaseToken: placement.leaseToken };
    this.attemptId = `${placement.jobId}-a${placement.attempt}`;
    const base = join(deps.workRoot, this.attemptId);
    const scratch = deps.scratchRoot === undefined ? base : join(deps.scratchRoot, this.attemptId);
    this.dirs = { base, scratch, workspace: join(scratch, "src"), home: join(scratch, "home") };
    this.logs = new LogShipper(deps.protocol, this.ref, deps.clock, deps.reporting);
    this.phases = new PhaseClock(deps.clock);
  }

  /**
   * Starts the job's wall-clock ceiling, once: from the first phase the tenant's input drives
   * (the dependency fetch, else cargo), so the fetch, a lockfile's generation and cargo share it.
   */
  startCeiling(): void {
    this.#ceilingStartedMs ??= this.deps.clock.now().getTime();
  }

  /** Milliseconds of the ceiling left (all of it before it started). */
  ceilingLeftMs(): number {
    const whole = this.placement.wallClockSeconds * 1000;
    return this.#ceilingStartedMs === null ? whole : whole - (this.deps.clock.now().getTime() - this.#ceilingStartedMs);
  }

  /** Whole seconds of the ceiling a sandbox run may still take (at least 1: it then ends at once). */
  ceilingLeftSeconds(): number {
    return Math.max(1, Math.ceil(this.ceilingLeftMs() / 1000));
  }

  /** A line of the service's own in the job's log. */
  system(text: string): void {
    this.logs.push("system", text);
  }
}
