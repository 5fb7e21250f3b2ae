import { type Clock, systemClock } from "../clock.js";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { type AppendAuditEntryInput, type AuditEntry, auditEntryFromRow } from "./audit-entry.js";

/**
 * Appends an entry to the operator audit log (operator-console actions, which belong to no
 * tenant). Append-only like the tenant log, enforced by the database.
 */
export async function appendOperatorAuditEntry(
  storage: StorageOrTransaction,
  input: AppendAuditEntryInput,
  clock: Clock = systemClock,
): Promise<AuditEntry> {
  const changedAt = formatTimestamp(input.changedAt ?? clock.now());
  const row = await executorOf(storage)
    .insertInto("operator_audit_entries")
    .values({
      actor: input.actor,
      target: input.target,
      value: input.value,
      changed_at: changedAt,
      effective: input.effective ?? changedAt,
    })
    .returning(["sequence", "actor", "target", "value", "changed_at", "effective"])
    .executeTakeFirstOrThrow();
  return auditEntryFromRow(row);
}
