import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Marks the link used and returns whom it signs in — once. The conditional UPDATE is the
 * lock: of two concurrent redemptions (even in two processes) exactly one matches
 * `used_at IS NULL`, so a link never opens two sessions.
 */
export async function redeemSignInLink(
  target: StorageOrTransaction,
  tokenHash: string,
  at: Date,
): Promise<{ tenantId: string; personId: string } | undefined> {
  const now = formatTimestamp(at);
  const row = await executorOf(target)
    .updateTable("sign_in_links")
    .set({ used_at: now })
    .where("token_hash", "=", tokenHash)
    .where("used_at", "is", null)
    .where("expires_at", ">", now)
    .returning(["tenant_id", "person_id"])
    .executeTakeFirst();
  return row === undefined ? undefined : { tenantId: row.tenant_id, personId: row.person_id };
}
