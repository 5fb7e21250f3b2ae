/** One step's state in a recovery's ledger, as the host operator knows it. */
export interface LedgerEntry {
  readonly position: number;
  readonly step: string;
  readonly state: string;
}

export interface RecoveryRequest {
  readonly operation: string;
  readonly rescueRead: boolean;
  readonly rescueSshPublicKey: string | null;
}

export interface StepResult {
  readonly outcome: "succeeded" | "failed";
  readonly detail: string;
  /** A failed step whose failure the plan answers with a later step (e.g. the host not back). */
  readonly recoverable?: boolean;
}

/**
 * A way of recovering a host, run by the host operator on the host's side (never on the
 * control plane or its caller). `local` restarts the kiln-host service it supervises; a
 * bare-metal provider drives the machine through its provider's API. The control plane decides
 * which steps are destructive (by name: reinstallation, partitioning, filesystem_operation) and
 * begins none of those without an approval.
 */
export interface RecoveryProvider {
  readonly kind: "local" | "bare-metal";
  /** The service the confirmation names: `recover-boot:<serviceName>:preserve-root-and-srv`. */
  readonly serviceName: string;
  /** Whether the provider's identity (its API credential) is readable here; it is never sent. */
  identityReadable(): Promise<boolean>;
  /** The installation the recovery binding configures, where it names one. */
  readonly installation: string | null;
  plan(request: RecoveryRequest): string[];
  /** Whether a planned step still has to run, given the ledger so far (else it is skipped). */
  needed(step: string, ledger: readonly LedgerEntry[]): boolean;
  runStep(step: string, request: RecoveryRequest): Promise<StepResult>;
}
