import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Revokes the tenant's live credential of that name; its name becomes free for a new one. */
export async function revokeAgentCredential(
  target: StorageOrTransaction,
  input: { tenantId: string; name: string; revokedBy: string },
  now: Date,
): Promise<{ kind: "revoked"; revokedAt: string } | { kind: "not_found" }> {
  const revokedAt = formatTimestamp(now);
  const result = await executorOf(target)
    .updateTable("agent_credentials")
    .set({ revoked_at: revokedAt, revoked_by: input.revokedBy, live_name: null })
    .where("tenant_id", "=", input.tenantId)
    .where("live_name", "=", input.name)
    .where("revoked_at", "is", null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n ? { kind: "revoked", revokedAt } : { kind: "not_found" };
}
