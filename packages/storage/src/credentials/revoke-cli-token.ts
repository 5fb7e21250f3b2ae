import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Revokes one of the person's own live CLI tokens; another person's token is not found. */
export async function revokeCliToken(
  target: StorageOrTransaction,
  input: { tenantId: string; personId: string; id: string },
  now: Date,
): Promise<{ kind: "revoked"; revokedAt: string } | { kind: "not_found" }> {
  const revokedAt = formatTimestamp(now);
  const result = await executorOf(target)
    .updateTable("cli_tokens")
    .set({ revoked_at: revokedAt, revoked_by: input.personId })
    .where("id", "=", input.id)
    .where("tenant_id", "=", input.tenantId)
    .where("person_id", "=", input.personId)
    .where("revoked_at", "is", null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n ? { kind: "revoked", revokedAt } : { kind: "not_found" };
}
