import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage } from "../pagination/keyset-page.js";
import { type AuditPage, auditEntryFromRow, NEWEST_AUDIT_ENTRIES_FIRST } from "./audit-entry.js";

/** One page of the operator audit log, newest first. */
export async function listOperatorAuditEntries(
  storage: StorageOrTransaction,
  input: { limit: number; cursor?: string | null },
): Promise<AuditPage> {
  const query = executorOf(storage)
    .selectFrom("operator_audit_entries")
    .select(["sequence", "actor", "target", "value", "changed_at", "effective"]);
  const page = await fetchKeysetPage(query, {
    sort: NEWEST_AUDIT_ENTRIES_FIRST,
    limit: input.limit,
    cursor: input.cursor,
  });
  return { entries: page.rows.map(auditEntryFromRow), nextCursor: page.nextCursor };
}
