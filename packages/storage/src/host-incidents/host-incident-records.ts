import type { Selectable } from "kysely";
import type { HostIncidentApprovalsTable, HostIncidentsTable } from "../schema.js";

export interface HostIncidentRecord {
  id: string;
  hostId: string;
  state: "open" | "closed";
  revision: number;
  openedAt: string;
  closedAt: string | null;
  closedBy: string | null;
  automaticRecoveriesSpent: number;
  awaitingOperator: boolean;
  awaitingReason: string | null;
  approvals: { step: string; approvedBy: string; approvedAt: string }[];
}

export function incidentRecordOf(
  row: Selectable<HostIncidentsTable>,
  approvals: readonly Selectable<HostIncidentApprovalsTable>[],
): HostIncidentRecord {
  return {
    id: row.id,
    hostId: row.host_id,
    state: row.state,
    revision: Number(row.revision),
    openedAt: row.opened_at,
    closedAt: row.closed_at,
    closedBy: row.closed_by,
    automaticRecoveriesSpent: Number(row.automatic_recoveries_spent),
    awaitingOperator: Number(row.awaiting_operator) === 1,
    awaitingReason: row.awaiting_reason,
    approvals: approvals.map((a) => ({ step: a.step, approvedBy: a.approved_by, approvedAt: a.approved_at })),
  };
}
