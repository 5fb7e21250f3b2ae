import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { HostRecoveryRecord } from "./host-recovery-records.js";
import { withRecoverySteps } from "./read-host-recovery-steps.js";

/** A host's recoveries with their ledgers, newest first (or only one, when `operation` names it). */
export async function listHostRecoveries(
  target: StorageOrTransaction,
  input: { hostId: string; operation?: string; incidentId?: string },
): Promise<HostRecoveryRecord[]> {
  let query = executorOf(target)
    .selectFrom("host_recoveries")
    .selectAll()
    .where("host_id", "=", input.hostId)
    .orderBy("invoked_at", "desc")
    .orderBy("id", "desc");
  if (input.operation !== undefined) query = query.where("id", "=", input.operation);
  if (input.incidentId !== undefined) query = query.where("incident_id", "=", input.incidentId);
  return withRecoverySteps(target, await query.execute());
}
