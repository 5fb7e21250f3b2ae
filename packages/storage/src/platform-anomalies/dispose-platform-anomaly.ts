import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Records an operator's disposition of a platform anomaly. It writes the anomaly's row and
 * nothing else: no job, attempt, host or admission changes (rule 7). False for an unknown id.
 */
export async function disposePlatformAnomaly(
  target: StorageOrTransaction,
  input: { id: string; disposition: string; note: string | null; actor: string; now: Date },
): Promise<boolean> {
  const updated = await executorOf(target)
    .updateTable("platform_anomalies")
    .set({
      disposition: input.disposition,
      disposition_note: input.note,
      disposed_by: input.actor,
      disposed_at: formatTimestamp(input.now),
    })
    .where("id", "=", input.id)
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) > 0;
}
