import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Raises a flag unless the rule already raised it for this tenant and subject: the unique
 * (rule, tenant_id, subject) index decides, ON CONFLICT DO NOTHING, so a rule evaluated again
 * (by the next pass, or by another kiln-server at once) never duplicates a flag nor overwrites
 * its disposition. Answers whether a new flag was raised.
 */
export async function raiseTenantAnomaly(
  target: StorageOrTransaction,
  input: {
    id: string;
    tenantId: string;
    rule: string;
    subject: string;
    jobId: string | null;
    evidence: string;
    now: Date;
  },
): Promise<boolean> {
  const inserted = await executorOf(target)
    .insertInto("tenant_anomalies")
    .values({
      id: input.id,
      tenant_id: input.tenantId,
      rule: input.rule,
      subject: input.subject,
      job_id: input.jobId,
      raised_at: formatTimestamp(input.now),
      evidence: input.evidence,
      disposition: null,
      disposition_note: null,
      disposed_by: null,
      disposed_at: null,
    })
    .onConflict((c) => c.doNothing())
    .executeTakeFirst();
  return inserted.numInsertedOrUpdatedRows === 1n;
}
