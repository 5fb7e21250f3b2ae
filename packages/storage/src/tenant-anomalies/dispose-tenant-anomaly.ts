import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { type TenantAnomalyRecord, tenantAnomalyRecordOf } from "./tenant-anomaly-record.js";

/**
 * Records the operator's disposition of a flag (replacing an earlier one) and nothing else:
 * one UPDATE of the flag's own row. Undefined when no flag has the id.
 */
export async function disposeTenantAnomaly(
  target: StorageOrTransaction,
  input: { id: string; disposition: string; note: string | null; actor: string; now: Date },
): Promise<TenantAnomalyRecord | undefined> {
  const row = await executorOf(target)
    .updateTable("tenant_anomalies")
    .set({
      disposition: input.disposition,
      disposition_note: input.note,
      disposed_by: input.actor,
      disposed_at: formatTimestamp(input.now),
    })
    .where("id", "=", input.id)
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? undefined : tenantAnomalyRecordOf(row);
}
