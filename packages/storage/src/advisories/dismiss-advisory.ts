import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import type { AdvisoryDismissal } from "./list-dismissals.js";

/**
 * Remembers that `dismissedBy` dismissed one of the repository's advisories. The first dismissal
 * is the one kept: dismissing it again changes nothing and answers the remembered one
 * (`created: false`), so the caller audits only a new dismissal. Joins the caller's transaction
 * (the keyed mutation's receipt commits with it).
 */
export async function dismissAdvisory(
  target: StorageOrTransaction,
  input: { tenantId: string; repository: string; advisory: string; dismissedBy: string; now: Date },
): Promise<{ dismissal: AdvisoryDismissal; created: boolean }> {
  const db = executorOf(target);
  const inserted = await db
    .insertInto("advisory_dismissals")
    .values({
      tenant_id: input.tenantId,
      repository: input.repository,
      advisory: input.advisory,
      dismissed_by: input.dismissedBy,
      dismissed_at: formatTimestamp(input.now),
    })
    .onConflict((oc) => oc.columns(["tenant_id", "repository", "advisory"]).doNothing())
    .returning(["advisory", "dismissed_by", "dismissed_at"])
    .executeTakeFirst();
  if (inserted !== undefined) return { dismissal: dismissalOf(inserted), created: true };
  const kept = await db
    .selectFrom("advisory_dismissals")
    .select(["advisory", "dismissed_by", "dismissed_at"])
    .where("tenant_id", "=", input.tenantId)
    .where("repository", "=", input.repository)
    .where("advisory", "=", input.advisory)
    .executeTakeFirstOrThrow();
  return { dismissal: dismissalOf(kept), created: false };
}

const dismissalOf = (row: { advisory: string; dismissed_by: string; dismissed_at: string }): AdvisoryDismissal => ({
  advisory: row.advisory,
  dismissedBy: row.dismissed_by,
  dismissedAt: row.dismissed_at,
});
