import { executorOf, type StorageOrTransaction } from "../executor.js";

/** The host credential with this digest (its host and whether it was revoked), or undefined. */
export async function findHostCredentialByHash(
  target: StorageOrTransaction,
  tokenHash: string,
): Promise<{ hostId: string; issuedAt: string; revokedAt: string | null } | undefined> {
  const row = await executorOf(target)
    .selectFrom("host_credentials")
    .select(["host_id", "issued_at", "revoked_at"])
    .where("token_hash", "=", tokenHash)
    .executeTakeFirst();
  return row === undefined ? undefined : { hostId: row.host_id, issuedAt: row.issued_at, revokedAt: row.revoked_at };
}
