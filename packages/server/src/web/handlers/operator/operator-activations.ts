import {
  type HostActivationRecord,
  listHostActivations,
  listHostRecoveries,
  readHostOperationState,
} from "@kiln/storage";
import { admissionView, hostOperationView } from "../../../domain/hosts/recovery/host-recovery-views.js";
import { refuse } from "../../../domain/refusal.js";
import type { Handler } from "../../http/handler.js";

/**
 * operator.hosts.activations.get: the host operator's readiness as last recorded (never the
 * provider identity: only whether it is readable), the boot holding the host's authority, and
 * its activations — each start of the host operator on a boot, recorded with the readiness it
 * reported (storage host-recovery/record-host-activation.ts): its plan, its ledger and its
 * receipt, most recently written first. A boot holds the host's authority once its host
 * operator recorded readiness; a host with none is `not_found` (rule 3), as is an `operation`
 * the host has no activation of. Reading mutates nothing.
 */
function activationView(a: HostActivationRecord) {
  return {
    operation: a.operation,
    boot: a.boot,
    instance: a.instance,
    started_at: a.startedAt,
    plan: a.plan,
    steps: a.steps.map((s) => ({
      step: s.step,
      state: s.state,
      // No step a host operator runs as it starts destroys anything.
      destructive: false,
      started_at: s.startedAt,
      finished_at: s.finishedAt,
      ...(s.detail === null ? {} : { detail: s.detail }),
    })),
    receipt:
      a.receipt === null
        ? null
        : {
            outcome: a.receipt.outcome,
            finished_at: a.receipt.finishedAt,
            ...(a.receipt.detail === null ? {} : { detail: a.receipt.detail }),
          },
    written_at: a.writtenAt,
  };
}

export const getHostActivations: Handler<"operator.hosts.activations.get"> = async (ctx) => {
  const hostId = ctx.params.id;
  const state = await readHostOperationState(ctx.db, hostId);
  if (state === undefined) return refuse("not_found", `no host ${hostId}`);
  const readiness = state.readiness;
  if (readiness === null) return refuse("not_found", `host ${hostId} has no boot holding its authority`);
  const operation = ctx.query.operation;
  const activations = await listHostActivations(ctx.db, {
    hostId,
    ...(operation === undefined ? {} : { operation }),
  });
  if (operation !== undefined && activations.length === 0) {
    return refuse("not_found", `host ${hostId} has no activation ${operation}`);
  }
  const [newest] = await listHostRecoveries(ctx.db, { hostId });
  return {
    host: hostId,
    admission: admissionView(state),
    host_operation: hostOperationView(state, newest),
    readiness: {
      instance: readiness.instance,
      started_at: readiness.startedAt,
      environment: readiness.environment,
      host_reported: readiness.hostReported,
      provisioning_bundle_sha256: readiness.provisioningBundleSha256,
      recovery_binding_loaded: readiness.recoveryBindingLoaded,
      installation: readiness.installation,
      provider_identity_readable: readiness.providerIdentityReadable,
      recorded_at: readiness.recordedAt,
      provider: readiness.provider,
    },
    boot_authority: { boot: readiness.boot, since: readiness.bootSince },
    activations: activations.map(activationView),
  };
};
