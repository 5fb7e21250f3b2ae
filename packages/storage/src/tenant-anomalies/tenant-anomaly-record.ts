import type { Selectable } from "kysely";
import type { TenantAnomaliesTable } from "../schema.js";

/** A tenant anomaly flag as stored: what raised it, its evidence (JSON text) and disposition. */
export interface TenantAnomalyRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly rule: string;
  readonly subject: string;
  readonly jobId: string | null;
  readonly raisedAt: string;
  /** JSON: the evidence items the rule recorded. */
  readonly evidence: string;
  readonly disposition: {
    readonly disposition: string;
    readonly note: string | null;
    readonly disposedBy: string;
    readonly disposedAt: string;
  } | null;
}

export function tenantAnomalyRecordOf(row: Selectable<TenantAnomaliesTable>): TenantAnomalyRecord {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    rule: row.rule,
    subject: row.subject,
    jobId: row.job_id,
    raisedAt: row.raised_at,
    evidence: row.evidence,
    disposition:
      row.disposition === null || row.disposed_by === null || row.disposed_at === null
        ? null
        : {
            disposition: row.disposition,
            note: row.disposition_note,
            disposedBy: row.disposed_by,
            disposedAt: row.disposed_at,
          },
  };
}
