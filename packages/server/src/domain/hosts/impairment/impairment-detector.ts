import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import {
  AUTOMATIC_RECOVERY_OFF_REASON,
  type HostInitializationRecord,
  type ImpairmentEvidence,
  listHostRecords,
  listHostRecoveries,
  markHostIncidentAwaiting,
  raiseHostImpairment,
  readHostHealthReport,
  readHostInitialization,
  readHostLiveLease,
  readHostOperationState,
  reopenHostAdmission,
  type Storage,
} from "@kiln/storage";
import { invokeRecovery } from "../recovery/invoke-recovery.js";
import { recoveryConfirmationOf } from "../recovery/recovery-confirmation.js";
import {
  DEFAULT_IMPAIRMENT_BOUNDS,
  type HostMeasurements,
  type ImpairmentBounds,
  impairmentsOf,
} from "./impairment-measurements.js";

/** A newest initialization that failed, as the detector measures it; null otherwise. */
function failedInitializationOf(
  initialization: HostInitializationRecord | undefined,
): HostMeasurements["failedInitialization"] {
  if (initialization?.state !== "failed") return null;
  return {
    operation: initialization.operation,
    failure: initialization.failure ?? "initialization failed",
    at: initialization.finishedAt ?? initialization.startedAt,
  };
}

/** Automatic recoveries one incident may spend before it awaits an operator. */
export const MAX_AUTOMATIC_RECOVERIES = 2;

export type ImpairmentEvent =
  | { readonly type: "impairment:raised"; readonly hostId: string; readonly kind: string; readonly incidentId: string }
  | { readonly type: "recovery:automatic"; readonly hostId: string; readonly operation: string }
  | { readonly type: "admission:reopened"; readonly hostId: string; readonly operation: string }
  | {
      readonly type: "incident:awaiting";
      readonly hostId: string;
      readonly incidentId: string;
      readonly reason: string;
    };

export interface ImpairmentDetectorDeps {
  readonly storage: Storage;
  readonly clock: Clock;
  readonly log: Logger;
  readonly bounds?: ImpairmentBounds;
  readonly onEvent?: (event: ImpairmentEvent) => void;
  readonly onFailure?: (failure: LoopFailure) => void;
}

/**
 * Watches every host kiln records for impairment — missed heartbeats on the injected clock (a
 * claim or a health report is a heartbeat), a disk filling under its data dir, a failed
 * initialization step, and canary failures reported to it — and answers each in one
 * transaction: a platform anomaly, the host's open incident (a new one when none is open), and
 * admission closed (storage host-incidents/raise-host-impairment.ts).
 *
 * Then, per host with an open incident:
 * - policy `automatic`: a recovery is invoked by the platform (surface `automatic`, operator
 *   `platform`) when none is open, up to MAX_AUTOMATIC_RECOVERIES per incident; after that the
 *   incident awaits an operator saying so. A recovery that just finished is given one heartbeat
 *   bound for its host to speak again before another is invoked.
 * - policy off or unset: nothing further (rule 4); the incident awaits an operator.
 * - admission reopens once the incident's newest recovery succeeded and the host has spoken
 *   since that recovery began, with no impairment left. That is the one automatic reopening:
 *   the incident itself stays open until an operator closes it, and closing it leaves admission
 *   as it stands (rule 6).
 */
export class ImpairmentDetector {
  readonly #bounds: ImpairmentBounds;

  constructor(private readonly deps: ImpairmentDetectorDeps) {
    this.#bounds = deps.bounds ?? DEFAULT_IMPAIRMENT_BOUNDS;
  }

  /** One pass over every host. */
  async runOnce(): Promise<void> {
    for (const host of await listHostRecords(this.deps.storage)) {
      const health = (await readHostHealthReport(this.deps.storage, host.id)) ?? null;
      const seen = [host.lastHeartbeatAt, health?.reportedAt ?? null].filter((t): t is string => t !== null).sort();
      const measurements: HostMeasurements = {
        hostId: host.id,
        lastSeenAt: seen.at(-1) ?? null,
        liveLeaseUntil: await readHostLiveLease(this.deps.storage, host.id),
        health,
        failedInitialization: failedInitializationOf(
          await readHostInitialization(this.deps.storage, { hostId: host.id }),
        ),
      };
      const impairments = impairmentsOf(measurements, this.#bounds, this.deps.clock.now());
      for (const impairment of impairments) await this.#raise(host.id, impairment);
      await this.#answerIncident(host.id, measurements, impairments.length > 0);
    }
  }

  /**
   * A canary that failed on a host is an impairment of it (helper for the canary loop): raised
   * and answered at once, as a detector pass would.
   */
  async reportCanaryFailure(input: { hostId: string; jobId: string | null; detail: string }): Promise<void> {
    await this.#raise(input.hostId, {
      kind: "canary_failed",
      evidence: [
        {
          kind: "canary_failed",
          detail: input.detail,
          ...(input.jobId === null ? {} : { reference: `job:${input.jobId}` }),
          observed_at: this.deps.clock.now().toISOString(),
        },
      ],
    });
    const health = (await readHostHealthReport(this.deps.storage, input.hostId)) ?? null;
    await this.#answerIncident(
      input.hostId,
      { hostId: input.hostId, lastSeenAt: null, liveLeaseUntil: null, health, failedInitialization: null },
      true,
    );
  }

  async #raise(hostId: string, impairment: { kind: string; evidence: ImpairmentEvidence[] }): Promise<void> {
    const { storage, clock } = this.deps;
    const raised = await storage.transaction((trx) =>
      raiseHostImpairment(
        trx,
        { hostId, kind: impairment.kind, evidence: impairment.evidence, now: clock.now() },
        storage.capabilities.rowLocks,
      ),
    );
    if (raised.kind !== "raised" || raised.anomalyId === null) return;
    this.deps.log.warn(
      { hostId, kind: impairment.kind, incident: raised.incidentId, anomaly: raised.anomalyId },
      `host ${hostId} impaired (${impairment.kind}): ${impairment.evidence.map((e) => e.detail).join("; ")}`,
    );
    this.deps.onEvent?.({ type: "impairment:raised", hostId, kind: impairment.kind, incidentId: raised.incidentId });
  }

  async #answerIncident(hostId: string, measurements: HostMeasurements, impaired: boolean): Promise<void> {
    const { storage, clock } = this.deps;
    const state = await readHostOperationState(storage, hostId);
    if (state === undefined) return;
    const now = clock.now();

    // Reopening looks at the host's newest recovery, whether or not an incident is still open:
    // an operator may have closed the incident (admission left as it stood) and then recovered
    // the host. It must have been claimed after admission closed, and the host have spoken since.
    if (!state.admission.open && !impaired && state.admission.closedAt !== null) {
      const [latest] = await listHostRecoveries(storage, { hostId });
      const claimedAt = latest?.state === "succeeded" ? latest.claimedAt : null;
      if (latest !== undefined && claimedAt !== null && claimedAt >= state.admission.closedAt) {
        const spokeSince = measurements.lastSeenAt !== null && measurements.lastSeenAt >= claimedAt;
        if (spokeSince && (await reopenHostAdmission(storage, { hostId }))) {
          this.deps.log.info(
            { hostId, operation: latest.id },
            `host ${hostId} recovered by ${latest.id}; admission reopened`,
          );
          this.deps.onEvent?.({ type: "admission:reopened", hostId, operation: latest.id });
        }
        return;
      }
    }
    const incident = state.openIncident;
    if (incident === null) return;
    const [newest] = await listHostRecoveries(storage, { hostId, incidentId: incident.id });
    if (state.admission.open) return;
    if (newest !== undefined && (newest.state === "recorded" || newest.state === "running")) return;

    if (state.policy === null || !state.policy.automatic) {
      await this.#await(hostId, incident.id, AUTOMATIC_RECOVERY_OFF_REASON);
      return;
    }
    if (newest?.finishedAt != null) {
      const sinceSeconds = (now.getTime() - Date.parse(newest.finishedAt)) / 1000;
      if (newest.state === "succeeded" && sinceSeconds <= this.#bounds.heartbeatSeconds) return;
    }
    if (incident.automaticRecoveriesSpent >= MAX_AUTOMATIC_RECOVERIES) {
      await this.#await(
        hostId,
        incident.id,
        `automatic recoveries spent (${incident.automaticRecoveriesSpent} of ${MAX_AUTOMATIC_RECOVERIES}); an operator invokes recovery`,
      );
      return;
    }
    if (state.readiness === null || !state.readiness.recoveryBindingLoaded) {
      await this.#await(hostId, incident.id, "no host operator with a loaded recovery binding has recorded readiness");
      return;
    }
    const request = `automatic-${incident.id}-${incident.automaticRecoveriesSpent + 1}`;
    const result = await invokeRecovery(
      storage,
      {
        hostId,
        incidentId: incident.id,
        request,
        surface: "automatic",
        operator: "platform",
        rescueRead: false,
        rescueSshPublicKey: null,
        expectedRevision: null,
        automatic: true,
        now,
      },
      {
        actor: "platform",
        value: (r) =>
          JSON.stringify({
            operation: "automatic recovery",
            outcome: r.kind,
            value: `${recoveryConfirmationOf(state.readiness?.providerServiceName ?? "unknown")} for incident ${incident.id}`,
          }),
      },
    );
    if (result.kind === "recorded") {
      this.deps.log.warn(
        { hostId, operation: result.recovery.id },
        `automatic recovery ${result.recovery.id} of ${hostId}`,
      );
      this.deps.onEvent?.({ type: "recovery:automatic", hostId, operation: result.recovery.id });
    }
  }

  async #await(hostId: string, incidentId: string, reason: string): Promise<void> {
    if (await markHostIncidentAwaiting(this.deps.storage, { incidentId, reason })) {
      this.deps.onEvent?.({ type: "incident:awaiting", hostId, incidentId, reason });
    }
  }
}

/** Runs the detector every `everyMs` on the clock; a failed pass is logged and emitted. */
export function startImpairmentDetector(
  deps: ImpairmentDetectorDeps,
  everyMs = 15_000,
): {
  detector: ImpairmentDetector;
  loop: PeriodicLoop;
} {
  const detector = new ImpairmentDetector(deps);
  const loop = startPeriodicLoop({
    name: "impairment detector",
    clock: deps.clock,
    everyMs,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: () => detector.runOnce(),
  });
  return { detector, loop };
}
