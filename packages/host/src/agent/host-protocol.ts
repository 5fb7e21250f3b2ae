import type {
  AppendAnswer,
  AttemptClaim,
  AttemptClaimAnswer,
  AttemptRef,
  AttemptResult,
  FinishAnswer,
  HeartbeatAnswer,
  HeldRegistryCredential,
  HostEnrollment,
  HostFleetPoll,
  HostFleetWork,
  HostInitializationReport,
  HostInitializationReportAnswer,
  HostReadAnswer,
  HostReadAnswerAck,
  LogLine,
  AttemptPlacement as Placement,
  RegistryCredentialGrant,
} from "@kiln/contract";

export type {
  AffectedTestsItem,
  AppendAnswer,
  AttemptClaim,
  AttemptClaimAnswer,
  AttemptFailure,
  AttemptPlacement as Placement,
  AttemptRef,
  AttemptReport,
  AttemptResult,
  CacheItem,
  CrateItem,
  FinishAnswer,
  HeartbeatAnswer,
  HeldRegistryCredential,
  HostEnrollment,
  Injection,
  LineageSave,
  LogLine,
  RegistryCredentialGrant,
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
  /**
   * The next attempt that fits `freeVcpus` and, where given, `freeDiskBytes` (the largest disk
   * quota the host can still grant: AttemptClaim), leased to this host, or null.
   */
  claim(hostId: string, freeVcpus: number, freeDiskBytes?: number): Promise<Placement | null>;
  /**
   * The long-poll claim, where the binding offers it (a remote host's HTTP binding): answered
   * at once when an attempt is claimable, else when one becomes so or the wait (`waitMs`, bounded
   * by the control plane) ends — with nothing and why. `withdraw` takes the claim back while no
   * answer has begun to arrive (an answer under way is read whole and returned: an attempt placed
   * on the host is never dropped by it); withdrawn, the call rejects. Without it the agent polls
   * `claim` on its clock.
   */
  claimWaiting?(request: AttemptClaim, withdraw: AbortSignal): Promise<AttemptClaimAnswer>;
  /** Renews the lease; `cancel` asks the host to reap; `stale` means another holder owns it now. */
  heartbeat(ref: AttemptRef): Promise<HeartbeatAnswer>;
  appendLogs(ref: AttemptRef, lines: readonly LogLine[]): Promise<AppendAnswer>;
  fetchBlob(sha256: string): Promise<Buffer>;
  putBlob(bytes: Uint8Array): Promise<{ sha256: string; bytes: number }>;
  finish(ref: AttemptRef, result: AttemptResult): Promise<FinishAnswer>;
  /**
   * The attempt's tenant's current private registry credentials, for the dependency gateway;
   * fenced by the lease (a stale attempt gets none). The host keeps them only for the attempt.
   */
  registryCredentials(ref: AttemptRef): Promise<readonly RegistryCredentialGrant[]>;
  /**
   * The host acknowledges that from now on it uses the current version of every registry
   * credential, except the older ones attempts in flight still hold (`held`); the control plane
   * removes a prior value once every host has acknowledged past it.
   */
  acknowledgeCredentials(hostId: string, held: readonly HeldRegistryCredential[]): Promise<void>;
  /**
   * The host's poll for operator-requested fleet work (an initialization to run), naming the
   * attempts it runs sandboxes for so the control plane can flag an orphaned one.
   */
  fleetPoll(poll: HostFleetPoll): Promise<HostFleetWork>;
  /** The host's step ledger of an initialization so far; `stale` once it is not the host's open one. */
  reportInitialization(report: HostInitializationReport): Promise<HostInitializationReportAnswer["answer"]>;
  /** The host's answer to an operator's read (journal, kernel log, evidence file); `stale` once it waits no more. */
  answerRead(answer: HostReadAnswer): Promise<HostReadAnswerAck["answer"]>;
}
