import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Revokes every live credential of `hostId`; answers how many were live. */
export async function revokeHostCredentials(
  target: StorageOrTransaction,
  input: { hostId: string; now: Date },
): Promise<number> {
  const result = await executorOf(target)
    .updateTable("host_credentials")
    .set({ revoked_at: formatTimestamp(input.now) })
    .where("host_id", "=", input.hostId)
    .where("revoked_at", "is", null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}
