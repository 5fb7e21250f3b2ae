import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage } from "../pagination/keyset-page.js";
import { type AuditPage, auditEntryFromRow, NEWEST_AUDIT_ENTRIES_FIRST } from "./audit-entry.js";

/**
 * One page of a tenant's audit log, newest first. Throws `InvalidCursorError` for a cursor this
 * list did not issue.
 */
export async function listAuditEntries(
  storage: StorageOrTransaction,
  input: { tenantId: string; limit: number; cursor?: string | null },
): Promise<AuditPage> {
  const query = executorOf(storage)
    .selectFrom("audit_entries")
    .select(["sequence", "actor", "target", "value", "changed_at", "effective"])
    .where("tenant_id", "=", input.tenantId);
  const page = await fetchKeysetPage(query, {
    sort: NEWEST_AUDIT_ENTRIES_FIRST,
    limit: input.limit,
    cursor: input.cursor,
  });
  return { entries: page.rows.map(auditEntryFromRow), nextCursor: page.nextCursor };
}
