import type { HostInitializationOrder } from "@kiln/contract";
import type { Executor } from "./executor.js";
import type { AttemptReaper } from "./shared/reap-attempt.js";

/**
 * The host isolation seam: everything the host agent does that depends on how attempts are
 * isolated goes through one `HostIsolation` — running attempts (its executor), reading a
 * finished attempt's target dir on the host (artifacts), removing attempt directories, reaping
 * what a killed agent or an orphaned attempt left, and the steps of an operator-started
 * initialization. The agent, `startMachineHost` and the artifact publisher know nothing else of
 * the isolation. Two implementations: `sandbox` (executor/sandbox/) and `microvm`
 * (executor/microvm/); `selectHostIsolation` (select-isolation.ts) picks one per host.
 */

/** Which isolation a host serves with, what was asked for, and why it is this one. */
export interface IsolationChoice {
  readonly isolation: "sandbox" | "microvm";
  /** What the host was asked for (`KILN_EXECUTOR`). */
  readonly requested: "auto" | "microvm" | "sandbox";
  /**
   * Why this isolation serves, said in the host's log, operator.hosts.get and every unit's
   * evidence: e.g. "auto: KVM did not boot the probe guest within 5 s; serving with the sandbox".
   */
  readonly reason: string;
}

/**
 * One step of an operator-started initialization as this isolation's host runs it: checks or
 * prepares, resolves with what it found (the receipt's detail) or throws saying what is missing.
 */
export interface InitializationStep {
  /** The step's name in the ledger (`^[a-z][a-z0-9_]*$`). */
  readonly name: string;
  run(order: HostInitializationOrder): Promise<string>;
}

/** A file of a finished attempt's target dir, read on the host. */
export interface TargetFile {
  /** Relative to the target dir, `/`-separated. */
  readonly path: string;
  readonly bytes: number;
  /** The owner may execute it: the artifact is downloaded executable. */
  readonly executable: boolean;
  read(): Promise<Buffer>;
}

export interface HostIsolation {
  readonly choice: IsolationChoice;
  readonly executor: Executor;
  /**
   * Runs `use` on the regular files of a finished attempt's target dir that match any of the
   * patterns (`release/*`, `doc/**`), sorted, at most `limit`; the files are readable only while
   * `use` runs.
   */
  withTargetFiles<T>(
    targetDir: string,
    patterns: readonly string[],
    limit: number,
    use: (files: readonly TargetFile[]) => Promise<T>,
  ): Promise<T>;
  /** Deletes attempt directories, whatever the job left in them. */
  removeDirectories(paths: readonly string[]): Promise<void>;
  /** What attempts of a killed agent left on this host, removed before the first claim; returns what went. */
  reapStale(where: { readonly workRoot: string; readonly scratchRoot?: string }): Promise<string[]>;
  /** Reaps one attempt by id on an operator's request (an orphan the control plane flagged). */
  reaper(where: { readonly workRoot: string; readonly scratchRoot?: string }): AttemptReaper;
  /**
   * Unmounts the target disks kept mounted between attempts (kept-target-disk.ts) whose images
   * lie under `dirs`, or were deleted: the agent calls it when it stops (its work and lineage
   * roots) and when it starts (`[]`: a previous agent's orphans). Absent where nothing is kept.
   */
  releaseKeptDisks?(dirs: readonly string[]): Promise<void>;
  /** The steps of an operator-started initialization on this host, in order. */
  readonly initializationSteps: readonly InitializationStep[];
}
