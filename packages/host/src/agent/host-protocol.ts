import type { ResourceLimits } from "../executor/executor.js";

/**
 * What a host agent and the control plane say to each other. The agent depends on
 * nothing else of the control plane, so it runs in-process beside an embedded server
 * today and as its own `kiln-host` process over HTTP later, unchanged.
 */

/**
 * One entry of a job's exact source. A regular file (kind absent or `file`) has the content
 * named by sha256: in the blob of that name (inline sources), or — when `segments` is set
 * (streamed archives) — the concatenation of slices of the upload's part blobs, verified
 * against sha256 when the upload completed. A symlink (streamed archives only) is created
 * pointing at `target` verbatim; its sha256 is that of the target text and bytes is 0.
 */
export interface SourceEntry {
  readonly path: string;
  readonly sha256: string;
  readonly bytes: number;
  readonly executable: boolean;
  readonly kind?: "file" | "symlink";
  readonly target?: string;
  readonly segments?: readonly SourceSegment[];
}

/** A slice of a part blob: `length` bytes from `offset` of the blob named `part` (its SHA-256). */
export interface SourceSegment {
  readonly part: string;
  readonly offset: number;
  readonly length: number;
}

export interface Invocation {
  readonly operation: string;
  readonly toolchain?: string;
  readonly arguments: readonly string[];
  readonly working_directory?: string;
  readonly artifacts?: readonly string[];
  readonly environment?: Readonly<Record<string, string>>;
}

/** One leased attempt of one job, placed on this host. */
export interface Placement {
  readonly jobId: string;
  readonly attempt: number;
  readonly leaseToken: string;
  readonly size: string;
  readonly limits: ResourceLimits;
  readonly invocation: Invocation;
  /** The toolchain admitted at submission (requested or pinned by the source) and its origin. */
  readonly toolchain: string;
  readonly source: readonly SourceEntry[];
  readonly wallClockSeconds: number;
  /**
   * What keys the job's warm lineage on the host: the tenant, its repository and the job
   * class (`<family>/<profile>/<toolchain>`, decided at admission).
   */
  readonly tenant: string;
  readonly repository: string;
  readonly jobClass: string;
  /**
   * Set when the control plane purged or evicted the lineage: the host drops its state of it
   * that descends from `throughGeneration` or earlier before the attempt (lineage-store.ts).
   */
  readonly lineageDrop?: { readonly reason: "purged" | "evicted"; readonly throughGeneration: number } | null;
  /**
   * The build settings admission decided for the job (applied or not, with why). The host sets
   * the environment of the applied ones for cargo and reports all of them in the evidence.
   */
  readonly injections?: readonly Injection[];
  /**
   * The repository's affected_tests setting as admitted: a `cargo test` runs only the packages
   * the change since the lineage's last passing test run affects (affected-tests.ts).
   */
  readonly affectedTests?: boolean;
}

export interface Injection {
  readonly setting: string;
  readonly value: string;
  readonly origin: string;
  readonly status: "applied" | "not applied";
  readonly detail: string;
  readonly environment: { readonly name: string; readonly value: string } | null;
}

export interface AttemptRef {
  readonly jobId: string;
  readonly attempt: number;
  readonly leaseToken: string;
}

export interface LogLine {
  readonly stream: "stdout" | "stderr" | "system";
  readonly at: Date;
  readonly text: string;
}

export interface AttemptResult {
  readonly outcome: "passed" | "failed" | "cancelled";
  readonly exitCode: number | null;
  readonly failure: { phase: string; cause: string; detail: string } | null;
  /** The attempt's evidence (phases, crates, tests, unit, …) as the host measured it. */
  readonly report: Readonly<Record<string, unknown>>;
  readonly cargoOutput: { sha256: string; bytes: number } | null;
  readonly artifacts: readonly { path: string; bytes: number; sha256: string }[];
}

export interface HostProtocol {
  enroll(host: { id: string; vcpus: number; memoryBytes: number; isolation: string }): Promise<void>;
  /** The next attempt that fits `freeVcpus`, leased to this host, or null. */
  claim(hostId: string, freeVcpus: number): Promise<Placement | null>;
  /** Renews the lease; `cancel` asks the host to reap; `stale` means another holder owns it now. */
  heartbeat(ref: AttemptRef): Promise<"continue" | "cancel" | "stale">;
  appendLogs(ref: AttemptRef, lines: readonly LogLine[]): Promise<"accepted" | "stale">;
  fetchBlob(sha256: string): Promise<Buffer>;
  putBlob(bytes: Uint8Array): Promise<{ sha256: string; bytes: number }>;
  finish(ref: AttemptRef, result: AttemptResult): Promise<"finished" | "stale">;
}
