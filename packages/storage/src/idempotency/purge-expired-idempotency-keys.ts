import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Deletes receipts past retention whose reservation has also lapsed (a holder still inside its
 * reservation keeps its row). Purging is housekeeping only: reservation already treats such
 * rows as absent. Returns how many rows went.
 */
export async function purgeExpiredIdempotencyKeys(target: StorageOrTransaction, now: Date): Promise<number> {
  const nowText = formatTimestamp(now);
  const result = await executorOf(target)
    .deleteFrom("idempotency_keys")
    .where("expires_at", "<=", nowText)
    .where("reserved_until", "<=", nowText)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
