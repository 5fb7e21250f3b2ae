import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Revokes every live certificate of `hostId`; answers how many were live. The host's enrollment
 * token rows are locked first (FOR UPDATE where the engine has row locks), the order
 * renewHostCertificate takes too, so a renewal in flight either sees this revocation or has
 * committed its certificate before the UPDATE reads (and revokes) it. Run it in a transaction.
 */
export async function revokeHostCertificates(
  target: StorageOrTransaction,
  input: { hostId: string; now: Date; rowLocks: boolean },
): Promise<number> {
  const db = executorOf(target);
  let tokens = db.selectFrom("host_enrollment_tokens").select("token_hash").where("host_id", "=", input.hostId);
  if (input.rowLocks) tokens = tokens.forUpdate();
  await tokens.execute();
  const result = await db
    .updateTable("issued_certificates")
    .set({ revoked_at: formatTimestamp(input.now) })
    .where("role", "=", "host")
    .where("host_id", "=", input.hostId)
    .where("revoked_at", "is", null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}
