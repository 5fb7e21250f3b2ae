import type { KeysetSortColumn } from "../pagination/keyset-page.js";
import { formatTimestamp } from "../timestamps.js";

/** One append-only audit record (the contract's AuditEntry plus its position). */
export interface AuditEntry {
  /** Database-assigned, increasing in insertion order. */
  sequence: number;
  /** Principal: a user id, or `agent:<name>`. */
  actor: string;
  /** What changed, e.g. `credential:ci-bot`. */
  target: string;
  /** The value recorded; never a secret. */
  value: string;
  changedAt: string;
  /** From when it applies: a timestamp, or a phrase such as `next job`. */
  effective: string;
}

export interface AppendAuditEntryInput {
  actor: string;
  target: string;
  value: string;
  /** Defaults to the time of the change. */
  effective?: string;
  /** Defaults to the `now` the verb is given. */
  changedAt?: Date;
}

export interface AuditPage {
  /** Newest first. */
  entries: AuditEntry[];
  nextCursor: string | null;
}

interface AuditEntryRow {
  sequence: number;
  actor: string;
  target: string;
  value: string;
  changed_at: string;
  effective: string;
}

export function auditEntryFromRow(row: AuditEntryRow): AuditEntry {
  return {
    sequence: row.sequence,
    actor: row.actor,
    target: row.target,
    value: row.value,
    changedAt: row.changed_at,
    effective: row.effective,
  };
}

/**
 * Newest first. `changed_at` comes from the writing server's clock, so `sequence` (insertion
 * order) breaks ties and makes the order total.
 */
export const NEWEST_AUDIT_ENTRIES_FIRST: readonly KeysetSortColumn<AuditEntryRow>[] = [
  ["changed_at", "desc", "text"],
  ["sequence", "desc", "integer"],
];

/** The stored columns of an entry: when it applies defaults to when it changed. */
export function auditColumns(input: AppendAuditEntryInput, now: Date) {
  const changedAt = formatTimestamp(input.changedAt ?? now);
  return {
    actor: input.actor,
    target: input.target,
    value: input.value,
    changed_at: changedAt,
    effective: input.effective ?? changedAt,
  };
}

export const AUDIT_RETURNING = ["sequence", "actor", "target", "value", "changed_at", "effective"] as const;
