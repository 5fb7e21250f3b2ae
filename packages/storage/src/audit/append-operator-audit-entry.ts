import { executorOf, type StorageOrTransaction } from "../executor.js";
import {
  type AppendAuditEntryInput,
  AUDIT_RETURNING,
  type AuditEntry,
  auditColumns,
  auditEntryFromRow,
} from "./audit-entry.js";

/**
 * Appends an entry to the operator audit log (operator-console actions, which belong to no
 * tenant). Append-only like the tenant log, enforced by the database.
 */
export async function appendOperatorAuditEntry(
  storage: StorageOrTransaction,
  input: AppendAuditEntryInput,
  now: Date,
): Promise<AuditEntry> {
  const row = await executorOf(storage)
    .insertInto("operator_audit_entries")
    .values(auditColumns(input, now))
    .returning(AUDIT_RETURNING)
    .executeTakeFirstOrThrow();
  return auditEntryFromRow(row);
}
