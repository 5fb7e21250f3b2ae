import type { ImpairmentEvidence } from "@kiln/storage";

/** What the detector reads of one host: its last sign of life and its newest health report. */
export interface HostMeasurements {
  readonly hostId: string;
  /** The newest of its claims' heartbeat and its health report; null when it never spoke. */
  readonly lastSeenAt: string | null;
  /** The latest lease expiry of its running attempts (renewed by their heartbeats); null when none. */
  readonly liveLeaseUntil: string | null;
  readonly health: {
    readonly reportedAt: string;
    readonly diskFreeBytes: number;
    readonly diskTotalBytes: number;
    readonly failedInitializationStep: string | null;
  } | null;
  /**
   * The host's newest operator-started initialization when it failed (docs/fleet-operations.md):
   * the operation, its failure and when it ended; null when none failed.
   */
  readonly failedInitialization: { readonly operation: string; readonly failure: string; readonly at: string } | null;
}

export interface ImpairmentBounds {
  /** A host silent for longer than this has missed its heartbeats. */
  readonly heartbeatSeconds: number;
  /** Disk free under the host's data dir below this fraction of its total is a disk filling. */
  readonly diskFreeFraction: number;
}

export const DEFAULT_IMPAIRMENT_BOUNDS: ImpairmentBounds = { heartbeatSeconds: 60, diskFreeFraction: 0.05 };

export interface Impairment {
  readonly kind: "host_unresponsive" | "disk_filling" | "initialization_failed" | "canary_failed";
  readonly evidence: ImpairmentEvidence[];
}

/** The impairments the measurements show at `now` (none for a host that never spoke). */
export function impairmentsOf(m: HostMeasurements, bounds: ImpairmentBounds, now: Date): Impairment[] {
  const found: Impairment[] = [];
  const observedAt = now.toISOString();
  // A host busy with running attempts may not claim for a while; its renewed leases speak for it.
  const leaseLive = m.liveLeaseUntil !== null && Date.parse(m.liveLeaseUntil) > now.getTime();
  if (m.lastSeenAt !== null && !leaseLive) {
    const silentSeconds = Math.floor((now.getTime() - Date.parse(m.lastSeenAt)) / 1000);
    if (silentSeconds > bounds.heartbeatSeconds) {
      found.push({
        kind: "host_unresponsive",
        evidence: [
          {
            kind: "missed_heartbeats",
            detail: `no heartbeat for ${silentSeconds} s (bound ${bounds.heartbeatSeconds} s); last at ${m.lastSeenAt}`,
            reference: `host:${m.hostId}`,
            observed_at: observedAt,
          },
        ],
      });
    }
  }
  if (m.health !== null && m.health.diskTotalBytes > 0) {
    const fraction = m.health.diskFreeBytes / m.health.diskTotalBytes;
    if (fraction < bounds.diskFreeFraction) {
      found.push({
        kind: "disk_filling",
        evidence: [
          {
            kind: "disk_free",
            detail: `${m.health.diskFreeBytes} of ${m.health.diskTotalBytes} bytes free (${(fraction * 100).toFixed(2)} %, bound ${(bounds.diskFreeFraction * 100).toFixed(2)} %)`,
            reference: `host:${m.hostId}`,
            observed_at: m.health.reportedAt,
          },
        ],
      });
    }
  }
  if (m.health?.failedInitializationStep != null) {
    found.push({
      kind: "initialization_failed",
      evidence: [
        {
          kind: "failed_initialization_step",
          detail: `initialization step ${m.health.failedInitializationStep} failed`,
          reference: `host:${m.hostId}`,
          observed_at: m.health.reportedAt,
        },
      ],
    });
  }
  if (m.failedInitialization !== null) {
    found.push({
      kind: "initialization_failed",
      evidence: [
        {
          kind: "failed_initialization",
          detail: m.failedInitialization.failure,
          reference: `initialization:${m.failedInitialization.operation}`,
          observed_at: m.failedInitialization.at,
        },
      ],
    });
  }
  return found;
}
