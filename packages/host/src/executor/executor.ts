import type { ResourceLimits } from "@kiln/contract";

export type { ResourceLimits } from "@kiln/contract";

/**
 * The executor interface: one attempt of one job, run in isolation. Implementations
 * (`sandbox` with bubblewrap + cgroups; later `microvm` with QEMU) share one test suite.
 * An executor never talks to the control plane: the host agent hands it a prepared job
 * directory and streams what it reports.
 */

/** A rustup toolchain the host admits: its name and the directory holding bin/cargo, bin/rustc, lib/. */
export interface AdmittedToolchain {
  readonly name: string;
  readonly path: string;
}

/**
 * Where the three job directories appear inside the isolated unit. Stable mount points are
 * what make a warm target dir reusable: cargo's fingerprints hash the absolute paths of
 * workspace members and of CARGO_TARGET_DIR, so an attempt that sees its source at
 * `/kiln/src` finds the fingerprints an earlier attempt wrote there fresh, wherever the
 * host keeps either attempt's directories.
 */
export interface MountPoints {
  readonly workspace: string;
  readonly target: string;
  readonly home: string;
}

/** Where the sandbox shows the job directories when the request names no mount points. */
export const NEUTRAL_MOUNTS: MountPoints = { workspace: "/kiln/src", target: "/kiln/target", home: "/kiln/home" };

/** A host directory (`source`) shown read-only inside the sandbox at `target`. */
export interface ReadOnlyBind {
  readonly source: string;
  readonly target: string;
}

export interface ExecutionRequest {
  /** Unique per attempt; names the cgroup and the job directories. */
  readonly attemptId: string;
  readonly limits: ResourceLimits;
  /** Host path holding the materialized source; the only writable place besides targetDir and homeDir. */
  readonly workspaceDir: string;
  /**
   * Host directory of the attempt's target dir. The sandbox executor keeps in it one file, the
   * target disk (`target-disk.ts`: an ext4 image it makes, sized by `limits.diskBytes`), whose
   * file system the sandbox sees as CARGO_TARGET_DIR; read it on the host with
   * `withTargetTree`. Other executors use the directory itself.
   */
  readonly targetDir: string;
  /** Host path used as HOME and CARGO_HOME for the attempt (writable, starts empty). */
  readonly homeDir: string;
  /**
   * Where workspaceDir, targetDir and homeDir appear inside (absolute, normalized, disjoint,
   * never the sandbox's own structure). Default: `NEUTRAL_MOUNTS`, which name nothing of the host.
   */
  readonly mounts?: MountPoints;
  /**
   * The target dir is a warm lineage that earlier attempts of this executor wrote (its target
   * disk is reused; a target dir without one holds a layout from before the disk quota and is
   * emptied). A cold one is expected empty.
   */
  readonly warmTarget?: boolean;
  /**
   * Extra host directories made visible read-only inside, each at its own in-sandbox path (e.g.
   * the dependency gateway's packages at a fixed path, so a warm target dir's fingerprints match).
   */
  readonly readOnlyBinds?: readonly ReadOnlyBind[];
  readonly toolchain: AdmittedToolchain;
  /** The command, argv[0] resolved inside the sandbox's PATH (e.g. ["cargo", "test", "--offline"]). */
  readonly argv: readonly string[];
  /** Relative to the workspace. */
  readonly workingDirectory: string;
  /** Exactly the environment the job declared, plus what the executor sets (PATH, HOME, CARGO_HOME, CARGO_TARGET_DIR, …); nothing from the host. */
  readonly environment: Readonly<Record<string, string>>;
  /** The attempt is ended (and reported `wall_clock_ceiling`) after this many seconds. */
  readonly wallClockSeconds: number;
  /** Only `offline` for now: no network namespace access at all. */
  readonly network: "offline";
  /**
   * Every byte the command writes, as it arrives, called in the one order the command wrote
   * across both streams (a write that returned before another began comes first): the log's
   * order is this order. Two pipes cannot give it; both isolations read both streams through one
   * kernel queue — the sandbox's relay (`sandbox/ordered-output.ts`), the microVM's guest agent —
   * and carry them in the same frames (`shared/output-frames.ts`).
   */
  readonly onOutput: (stream: "stdout" | "stderr", chunk: Buffer) => void;
  /** Aborting cancels the attempt: the whole process tree is reaped. */
  readonly signal: AbortSignal;
}

export type ExecutionOutcome =
  /** The command ran to its end; see exitCode. */
  | "exited"
  | "wall_clock_ceiling"
  | "cancelled"
  /** The executor itself failed (could not set up the sandbox, …); see detail. */
  | "infrastructure";

export interface ExecutionResult {
  readonly outcome: ExecutionOutcome;
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** The kernel killed a process for exceeding the memory limit. */
  readonly oomKilled: boolean;
  /**
   * The job's writes filled its disk quota (the target disk had no block left for it): some
   * write failed with ENOSPC. The target dir is then full, and a lineage holding it is dropped.
   */
  readonly diskQuotaExceeded: boolean;
  /** The disk quota the attempt ran with (bytes it could hold in its target dir), null where none was enforced. */
  readonly diskBytes: number | null;
  /** Bytes the target dir held when the attempt ended, where measured. */
  readonly diskUsedBytes: number | null;
  readonly startedAt: Date;
  readonly finishedAt: Date;
  /** CPU time the attempt consumed (user + system), where the cgroup reports it. */
  readonly cpuSeconds: number | null;
  readonly peakMemoryBytes: number | null;
  /** The isolation that actually ran, for the evidence: never claims more than it did. */
  readonly isolation: "sandbox" | "microvm";
  /** Human-readable notes on setup (cgroup layout found, limits applied), for the evidence and logs. */
  readonly detail: readonly string[];
}

/**
 * What one attempt may put on the host's disk: its size's quota (`limits.diskBytes`), lowered to
 * `maxAttemptBytes` where the host grants less (null: never lowered). The host agent claims an
 * attempt only while its volume's free space covers that (agent/disk-headroom.ts).
 */
export interface AttemptDiskPolicy {
  readonly maxAttemptBytes: number | null;
}

export interface Executor {
  readonly isolation: "sandbox" | "microvm";
  /** Where attempts write to the host's disk (the target disk): how much each may; absent, none does. */
  readonly disk?: AttemptDiskPolicy;
  run(request: ExecutionRequest): Promise<ExecutionResult>;
}
