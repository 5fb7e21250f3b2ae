import type { Kysely, Selectable } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { Database } from "../schema.js";

/**
 * Kysely types of the dogfood trial's tables (migration 0017). Kept beside their verbs and
 * added to the shared Database type with `withTables`, so the trial's storage stays in one folder.
 */
export type DogfoodTables = {
  dogfood_gate_evidence: {
    part: string;
    reference: string;
    /** run_record | credential | workflow_run | attested */
    source: string;
    expires_at: string | null;
    detail: string | null;
    produced_at: string | null;
    /** JSON: what the platform read when it verified the reference. */
    verification: string;
    recorded_by: string;
    recorded_at: string;
  };
  dogfood_gate_openings: { gate: string; opened_at: string; opened_by: string };
  dogfood_incidents: {
    id: string;
    class: string;
    occurred_at: string;
    service_blocking: number;
    detail: string;
    /** JSON array of run record identities. */
    records: string;
    recorded_by: string;
    recorded_at: string;
    issue_number: number | null;
    issue_filed_at: string | null;
    issue_recorded_by: string | null;
    issue_recorded_at: string | null;
    resolution_detail: string | null;
    resolved_by: string | null;
    resolved_at: string | null;
  };
  dogfood_maintenance: {
    id: string;
    starts_at: string;
    ends_at: string;
    reason: string;
    declared_by: string;
    declared_at: string;
  };
  dogfood_interventions: {
    id: string;
    action: string;
    routine: number;
    at: string;
    /** JSON array of run record identities. */
    records: string;
    recorded_by: string;
    recorded_at: string;
  };
  dogfood_lifecycle_changes: {
    kind: string;
    identity: string;
    at: string;
    detail: string;
    host: string | null;
    recorded_by: string;
    recorded_at: string;
  };
  dogfood_spend: { month: string; source: string; amount_cents: number; recorded_by: string; recorded_at: string };
};

export type DogfoodGateEvidenceRow = Selectable<DogfoodTables["dogfood_gate_evidence"]>;
export type DogfoodGateOpeningRow = Selectable<DogfoodTables["dogfood_gate_openings"]>;
export type DogfoodIncidentRow = Selectable<DogfoodTables["dogfood_incidents"]>;
export type DogfoodMaintenanceRow = Selectable<DogfoodTables["dogfood_maintenance"]>;
export type DogfoodInterventionRow = Selectable<DogfoodTables["dogfood_interventions"]>;
export type DogfoodLifecycleChangeRow = Selectable<DogfoodTables["dogfood_lifecycle_changes"]>;
export type DogfoodSpendRow = Selectable<DogfoodTables["dogfood_spend"]>;

/** The executor with the trial's tables in its type. */
export function dogfoodDb(target: StorageOrTransaction): Kysely<Database & DogfoodTables> {
  return executorOf(target).withTables<DogfoodTables>() as unknown as Kysely<Database & DogfoodTables>;
}

/** What an insert-if-absent verb answers: the row now stored, and whether this call stored it. */
export interface Recorded<Row> {
  readonly row: Row;
  readonly inserted: boolean;
}
