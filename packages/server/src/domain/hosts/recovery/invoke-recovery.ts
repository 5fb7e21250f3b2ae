import {
  appendOperatorAuditEntry,
  type HostRecoveryInvocationInput,
  type HostRecoveryInvocationResult,
  invokeHostRecovery,
  type Storage,
} from "@kiln/storage";

/** The operator audit entry's value for an invocation's result (never a secret: a public key at most). */
export type InvocationAuditValue = (result: HostRecoveryInvocationResult) => string;

/**
 * Records a recovery invocation and its operator audit entry in one transaction. Nothing runs
 * here or on the caller (rule 3): the host operator claims the recorded recovery and runs its
 * steps on the host's side.
 */
export async function invokeRecovery(
  storage: Storage,
  input: HostRecoveryInvocationInput,
  audit: { actor: string; value: InvocationAuditValue },
): Promise<HostRecoveryInvocationResult> {
  return storage.transaction(async (trx) => {
    const result = await invokeHostRecovery(trx, input, storage.capabilities.rowLocks);
    if (result.kind !== "not_found") {
      await appendOperatorAuditEntry(
        trx,
        { actor: audit.actor, target: `host:${input.hostId}`, value: audit.value(result) },
        input.now,
      );
    }
    return result;
  });
}
