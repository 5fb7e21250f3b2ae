import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Ends the session (sign-out); returns its handle if it was live. */
export async function endSession(
  target: StorageOrTransaction,
  tokenHash: string,
  now: Date,
): Promise<{ id: string } | undefined> {
  return executorOf(target)
    .updateTable("sessions")
    .set({ ended_at: formatTimestamp(now) })
    .where("token_hash", "=", tokenHash)
    .where("ended_at", "is", null)
    .returning("id")
    .executeTakeFirst();
}
