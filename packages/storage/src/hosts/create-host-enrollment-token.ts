import { executorOf, type StorageOrTransaction } from "../executor.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";

/** Records a one-time enrollment token for `hostId` by its digest; it expires after `ttlSeconds`. */
export async function createHostEnrollmentToken(
  target: StorageOrTransaction,
  input: { tokenHash: string; hostId: string; createdBy: string; ttlSeconds: number; now: Date },
): Promise<{ expiresAt: string }> {
  const expiresAt = formatTimestamp(addSeconds(input.now, input.ttlSeconds));
  await executorOf(target)
    .insertInto("host_enrollment_tokens")
    .values({
      token_hash: input.tokenHash,
      host_id: input.hostId,
      created_by: input.createdBy,
      created_at: formatTimestamp(input.now),
      expires_at: expiresAt,
      redeemed_at: null,
    })
    .execute();
  return { expiresAt };
}
