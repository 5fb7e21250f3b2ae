import { executorOf, type StorageOrTransaction } from "../executor.js";

/** An enrollment token by its digest: the host it enrolls and its window, or undefined. */
export async function findHostEnrollmentToken(
  target: StorageOrTransaction,
  tokenHash: string,
): Promise<{ hostId: string; expiresAt: string; redeemedAt: string | null } | undefined> {
  const row = await executorOf(target)
    .selectFrom("host_enrollment_tokens")
    .select(["host_id", "expires_at", "redeemed_at"])
    .where("token_hash", "=", tokenHash)
    .executeTakeFirst();
  return row === undefined
    ? undefined
    : { hostId: row.host_id, expiresAt: row.expires_at, redeemedAt: row.redeemed_at };
}
