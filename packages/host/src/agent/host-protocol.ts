import type {
  AppendAnswer,
  AttemptRef,
  AttemptResult,
  FinishAnswer,
  HeartbeatAnswer,
  HostEnrollment,
  LogLine,
  AttemptPlacement as Placement,
} from "@kiln/contract";

export type {
  AffectedTestsItem,
  AppendAnswer,
  AttemptFailure,
  AttemptPlacement as Placement,
  AttemptRef,
  AttemptReport,
  AttemptResult,
  CacheItem,
  FinishAnswer,
  HeartbeatAnswer,
  HostEnrollment,
  Injection,
  LogLine,
  SourceEntry,
  SourceSegment,
} from "@kiln/contract";

/**
 * What a host agent says to the control plane: the port the agent depends on, and nothing
 * else of the control plane. Every message is a contract schema (records/host-protocol.ts),
 * so a binding only moves them — in-process beside an embedded server, over HTTP for a
 * remote `kiln-host` — and holds no logic of its own.
 */
export interface HostProtocol {
  enroll(host: HostEnrollment): Promise<void>;
  /** The next attempt that fits `freeVcpus`, leased to this host, or null. */
  claim(hostId: string, freeVcpus: number): Promise<Placement | null>;
  /** Renews the lease; `cancel` asks the host to reap; `stale` means another holder owns it now. */
  heartbeat(ref: AttemptRef): Promise<HeartbeatAnswer>;
  appendLogs(ref: AttemptRef, lines: readonly LogLine[]): Promise<AppendAnswer>;
  fetchBlob(sha256: string): Promise<Buffer>;
  putBlob(bytes: Uint8Array): Promise<{ sha256: string; bytes: number }>;
  finish(ref: AttemptRef, result: AttemptResult): Promise<FinishAnswer>;
}
