import { type Clock, systemClock } from "../clock.js";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { type AppendAuditEntryInput, type AuditEntry, auditEntryFromRow } from "./audit-entry.js";

/**
 * Appends an entry to a tenant's audit log. Pass the transaction that makes the change, so the
 * change and its audit entry commit together. Entries can never be updated or deleted: the
 * database refuses (triggers installed by the initial migration).
 */
export async function appendAuditEntry(
  storage: StorageOrTransaction,
  input: AppendAuditEntryInput & { tenantId: string },
  clock: Clock = systemClock,
): Promise<AuditEntry> {
  const changedAt = formatTimestamp(input.changedAt ?? clock.now());
  const row = await executorOf(storage)
    .insertInto("audit_entries")
    .values({
      tenant_id: input.tenantId,
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
