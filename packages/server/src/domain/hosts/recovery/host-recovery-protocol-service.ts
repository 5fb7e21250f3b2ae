import type {
  Clock,
  HostHealthReport,
  HostOperatorReadiness,
  HostRecoveryClaimAnswer,
  HostRecoveryFinish,
  HostRecoveryPlan,
  HostRecoveryStepAnswer,
  HostRecoveryStepBegin,
  HostRecoveryStepEnd,
  Logger,
} from "@kiln/contract";
import {
  beginHostRecoveryStep,
  claimHostRecovery,
  endHostRecoveryStep,
  finishHostRecovery,
  recordHostHealthReport,
  recordHostOperatorReadiness,
  recordHostRecoveryPlan,
  type Storage,
} from "@kiln/storage";
import { Refusal } from "../../refusal.js";

/**
 * The control plane's side of the host's health and recovery messages
 * (contract/src/host-operator-protocol.ts). It records and answers; no recovery step runs here
 * (rule 3): the host operator runs them on the host's side and reports each one's start, end
 * and outcome into the ledger. `hostId` is the authenticated host's own.
 */
export class HostRecoveryProtocolService {
  constructor(private readonly deps: { storage: Storage; clock: Clock; log: Logger }) {}

  async health(hostId: string, report: HostHealthReport): Promise<void> {
    await recordHostHealthReport(this.deps.storage, {
      hostId,
      diskFreeBytes: report.diskFreeBytes,
      diskTotalBytes: report.diskTotalBytes,
      failedInitializationStep: report.failedInitializationStep,
      now: this.deps.clock.now(),
    });
  }

  async readiness(hostId: string, r: HostOperatorReadiness): Promise<void> {
    await recordHostOperatorReadiness(this.deps.storage, {
      hostId,
      readiness: {
        instance: r.instance,
        startedAt: r.startedAt,
        environment: r.environment,
        hostReported: r.hostId,
        provisioningBundleSha256: r.provisioningBundleSha256,
        recoveryBindingLoaded: r.recoveryBindingLoaded,
        installation: r.installation,
        providerIdentityReadable: r.providerIdentityReadable,
        provider: r.provider,
        providerServiceName: r.providerServiceName,
        boot: r.boot,
      },
      // The start's own ledger, when the host operator reports it (see recordHostOperatorReadiness).
      ...(r.activation === undefined
        ? {}
        : {
            activationSteps: r.activation.steps.map((s) => ({
              step: s.step,
              state: s.outcome,
              startedAt: s.startedAt,
              finishedAt: s.finishedAt,
              detail: s.detail,
            })),
          }),
      now: this.deps.clock.now(),
    });
  }

  async claim(hostId: string, instance: string): Promise<HostRecoveryClaimAnswer> {
    const recovery = await claimHostRecovery(this.deps.storage, { hostId, instance, now: this.deps.clock.now() });
    if (recovery === undefined) return { recovery: null };
    return {
      recovery: {
        operation: recovery.id,
        incident: recovery.incidentId,
        rescueRead: recovery.rescueRead,
        rescueSshPublicKey: recovery.rescueSshPublicKey,
        steps: recovery.steps.map((s) => ({ position: s.position, step: s.step, state: s.state })),
      },
    };
  }

  async plan(hostId: string, plan: HostRecoveryPlan): Promise<void> {
    const outcome = await recordHostRecoveryPlan(this.deps.storage, {
      hostId,
      recoveryId: plan.operation,
      steps: plan.steps,
    });
    if (outcome === "not_found") throw new Refusal("not_found", `host ${hostId} runs no recovery ${plan.operation}`);
  }

  async beginStep(hostId: string, begin: HostRecoveryStepBegin): Promise<HostRecoveryStepAnswer> {
    const answer = await beginHostRecoveryStep(this.deps.storage, {
      hostId,
      recoveryId: begin.operation,
      position: begin.position,
      now: this.deps.clock.now(),
    });
    if (answer.kind === "not_found") {
      throw new Refusal("not_found", `host ${hostId} runs no step ${begin.position} of recovery ${begin.operation}`);
    }
    return answer.kind === "proceed" ? { answer: "proceed" } : { answer: "await_approval", reason: answer.reason };
  }

  async endStep(hostId: string, end: HostRecoveryStepEnd): Promise<void> {
    const ended = await endHostRecoveryStep(this.deps.storage, {
      hostId,
      recoveryId: end.operation,
      position: end.position,
      outcome: end.outcome,
      detail: end.detail,
      now: this.deps.clock.now(),
    });
    if (!ended)
      throw new Refusal("not_found", `host ${hostId} runs no step ${end.position} of recovery ${end.operation}`);
  }

  async finish(hostId: string, finish: HostRecoveryFinish): Promise<void> {
    const finished = await finishHostRecovery(this.deps.storage, {
      hostId,
      recoveryId: finish.operation,
      outcome: finish.outcome,
      detail: finish.detail,
      now: this.deps.clock.now(),
    });
    if (!finished) throw new Refusal("not_found", `host ${hostId} runs no recovery ${finish.operation}`);
    this.deps.log.info(
      { hostId, operation: finish.operation, outcome: finish.outcome },
      `recovery ${finish.operation} of ${hostId} ${finish.outcome}`,
    );
  }
}
