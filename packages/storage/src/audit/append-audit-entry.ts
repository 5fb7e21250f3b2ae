import { executorOf, type StorageOrTransaction } from "../executor.js";
import {
  type AppendAuditEntryInput,
  AUDIT_RETURNING,
  type AuditEntry,
  auditColumns,
  auditEntryFromRow,
} from "./audit-entry.js";

/**
 * Appends an entry to a tenant's audit log. Pass the transaction that makes the change, so the
 * change and its audit entry commit together. Entries can never be updated or deleted: the
 * database refuses (triggers installed by the initial migration).
 */
export async function appendAuditEntry(
  storage: StorageOrTransaction,
  input: AppendAuditEntryInput & { tenantId: string },
  now: Date,
): Promise<AuditEntry> {
  const row = await executorOf(storage)
    .insertInto("audit_entries")
    .values({ tenant_id: input.tenantId, ...auditColumns(input, now) })
    .returning(AUDIT_RETURNING)
    .executeTakeFirstOrThrow();
  return auditEntryFromRow(row);
}
