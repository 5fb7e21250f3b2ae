import { inTransaction, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import type { HostActivationStepRecord } from "./host-activation-records.js";
import type { HostOperatorReadinessRecord } from "./read-host-operation-state.js";
import { recordHostActivation } from "./record-host-activation.js";

type Readiness = Omit<HostOperatorReadinessRecord, "recordedAt" | "bootSince">;

/**
 * Records the host operator's readiness, replacing the last one, and the activation (that start
 * of the host operator) it reports, in one transaction so that neither is kept without the
 * other. A new boot (`boot` differs) takes the host's authority from then on (`boot_since`);
 * the same boot keeps its instant. `activationSteps` are the steps the host operator ran as it
 * started; a host operator that does not report them (one from before activations were kept)
 * has them derived from what its readiness says. Returns the activation's operation.
 */
export async function recordHostOperatorReadiness(
  target: StorageOrTransaction,
  input: { hostId: string; readiness: Readiness; activationSteps?: HostActivationStepRecord[]; now: Date },
): Promise<string> {
  const now = formatTimestamp(input.now);
  const r = input.readiness;
  return inTransaction(target, async (db) => {
    const previous = await db
      .selectFrom("host_operator_readiness")
      .select(["boot", "boot_since"])
      .where("host_id", "=", input.hostId)
      .executeTakeFirst();
    const values = {
      instance: r.instance,
      started_at: r.startedAt,
      environment: r.environment,
      host_reported: r.hostReported,
      provisioning_bundle_sha256: r.provisioningBundleSha256,
      recovery_binding_loaded: r.recoveryBindingLoaded ? 1 : 0,
      installation: r.installation,
      provider_identity_readable: r.providerIdentityReadable ? 1 : 0,
      provider: r.provider,
      provider_service_name: r.providerServiceName,
      boot: r.boot,
      boot_since: previous !== undefined && previous.boot === r.boot ? previous.boot_since : now,
      recorded_at: now,
    };
    await db
      .insertInto("host_operator_readiness")
      .values({ host_id: input.hostId, ...values })
      .onConflict((c) => c.column("host_id").doUpdateSet(values))
      .execute();
    return recordHostActivation(db, {
      hostId: input.hostId,
      boot: r.boot,
      instance: r.instance,
      startedAt: r.startedAt,
      steps: input.activationSteps ?? stepsOfReadiness(r, now),
      now: input.now,
    });
  });
}

/** What a readiness without its own ledger says of the steps it ran, between its start and now. */
function stepsOfReadiness(r: Readiness, now: string): HostActivationStepRecord[] {
  const step = (name: string, state: HostActivationStepRecord["state"], detail: string) => ({
    step: name,
    state,
    startedAt: r.startedAt,
    finishedAt: now,
    detail,
  });
  return [
    step("load_provisioning_bundle", "succeeded", `bundle sha256 ${r.provisioningBundleSha256}`),
    r.recoveryBindingLoaded
      ? step(
          "load_recovery_binding",
          "succeeded",
          `${r.provider} provider for ${r.providerServiceName}${r.installation === null ? "" : ` (${r.installation})`}`,
        )
      : step("load_recovery_binding", "failed", "no recovery binding loaded"),
    r.recoveryBindingLoaded
      ? step(
          "check_provider_identity",
          r.providerIdentityReadable ? "succeeded" : "failed",
          r.providerIdentityReadable ? "readable" : "not readable",
        )
      : step("check_provider_identity", "skipped", "no recovery binding to read it from"),
  ];
}
