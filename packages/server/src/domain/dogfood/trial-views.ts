import type {
  DogfoodIncident,
  DogfoodIntervention,
  DogfoodLifecycleChange,
  DogfoodMaintenance,
  DogfoodSpend,
} from "@kiln/contract";
import type {
  DogfoodIncidentRow,
  DogfoodInterventionRow,
  DogfoodLifecycleChangeRow,
  DogfoodMaintenanceRow,
  DogfoodSpendRow,
} from "@kiln/storage";
import type { Static } from "@sinclair/typebox";

/** The trial's stored rows as the contract's records. */

export type IncidentDocument = Static<typeof DogfoodIncident>;

/** The UTC day of an instant (`YYYY-MM-DD`). */
export const utcDayOf = (at: string): string => new Date(at).toISOString().slice(0, 10);

export function incidentView(row: DogfoodIncidentRow): IncidentDocument {
  return {
    id: row.id,
    class: row.class,
    occurred_at: row.occurred_at,
    service_blocking: row.service_blocking === 1,
    detail: row.detail,
    records: JSON.parse(row.records) as string[],
    issue:
      row.issue_number === null || row.issue_filed_at === null
        ? null
        : {
            number: row.issue_number,
            filed_at: row.issue_filed_at,
            // Rule 10: an issue filed on a different UTC day than the incident is published as filed late.
            filed_late: utcDayOf(row.issue_filed_at) !== utcDayOf(row.occurred_at),
            recorded_by: row.issue_recorded_by,
            recorded_at: row.issue_recorded_at,
          },
    resolution:
      row.resolution_detail === null || row.resolved_at === null
        ? null
        : { detail: row.resolution_detail, recorded_by: row.resolved_by ?? "", recorded_at: row.resolved_at },
    recorded_by: row.recorded_by,
    recorded_at: row.recorded_at,
  };
}

export function maintenanceView(row: DogfoodMaintenanceRow): Static<typeof DogfoodMaintenance> {
  return { ...row };
}

export function interventionView(
  row: DogfoodInterventionRow,
  periodFailed?: boolean,
): Static<typeof DogfoodIntervention> {
  return {
    id: row.id,
    action: row.action,
    routine: row.routine === 1,
    at: row.at,
    records: JSON.parse(row.records) as string[],
    recorded_by: row.recorded_by,
    recorded_at: row.recorded_at,
    ...(periodFailed === undefined ? {} : { period_failed: periodFailed }),
  };
}

export function lifecycleChangeView(row: DogfoodLifecycleChangeRow): Static<typeof DogfoodLifecycleChange> {
  return {
    kind: row.kind as Static<typeof DogfoodLifecycleChange>["kind"],
    identity: row.identity,
    at: row.at,
    detail: row.detail,
    ...(row.host === null ? {} : { host: row.host }),
    recorded_by: row.recorded_by,
    recorded_at: row.recorded_at,
  };
}

export function spendView(row: DogfoodSpendRow, monthTotal?: number): Static<typeof DogfoodSpend> {
  return {
    month: row.month,
    source: row.source,
    amount_cents: row.amount_cents,
    recorded_by: row.recorded_by,
    recorded_at: row.recorded_at,
    ...(monthTotal === undefined ? {} : { month_total_cents: monthTotal }),
  };
}
