import type { ResponseDocumentOf } from "@kiln/contract";
import {
  appendOperatorAuditEntry,
  disposeTenantAnomaly,
  listTenantAnomalies,
  type TenantAnomalyRecord,
} from "@kiln/storage";
import { storedJson } from "../../../domain/jobs/stored-json.js";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import type { EvidenceItem } from "../../../domain/platform/tenant-anomalies/anomaly-rule.js";
import { TENANT_ANOMALY_RULES } from "../../../domain/platform/tenant-anomalies/tenant-anomaly-evaluator.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/** The list answers at most this many flags (undisposed first); older disposed ones fall off. */
const LIST_LIMIT = 1000;

function anomalyView(record: TenantAnomalyRecord): ResponseDocumentOf<"operator.anomalies.disposition"> {
  return {
    id: record.id,
    flag: record.rule,
    tenant: record.tenantId,
    rule: TENANT_ANOMALY_RULES.get(record.rule)?.description ?? record.rule,
    ...(record.jobId === null ? {} : { job: record.jobId }),
    raised_at: record.raisedAt,
    evidence: storedJson<EvidenceItem[]>(record.evidence) ?? [],
    disposition:
      record.disposition === null
        ? null
        : {
            disposition: record.disposition.disposition,
            note: record.disposition.note,
            disposed_by: record.disposition.disposedBy,
            disposed_at: record.disposition.disposedAt,
          },
  };
}

/** operator.anomalies.list: tenant anomaly flags with their evidence and disposition. */
export const listAnomalies: Handler<"operator.anomalies.list"> = async (ctx) =>
  (await listTenantAnomalies(ctx.db, { limit: LIST_LIMIT })).map(anomalyView);

/**
 * operator.anomalies.disposition: records the operator's disposition and note on the flag and
 * nothing else — no job, tenant control or admission changes — in one transaction with its
 * operator audit entry. An unknown flag is `operator_not_found`.
 */
export const disposeAnomaly: Handler<"operator.anomalies.disposition"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const { disposition, note } = ctx.body;
  const id = ctx.params.id;
  const record = await ctx.deps.storage.transaction(async (trx) => {
    const disposed = await disposeTenantAnomaly(trx, {
      id,
      disposition,
      note: note ?? null,
      actor: operator.principal,
      now: ctx.now,
    });
    if (disposed !== undefined) {
      await appendOperatorAuditEntry(
        trx,
        {
          actor: operator.principal,
          target: `anomaly:${id}`,
          value: operatorAuditValue(ctx.op.id, "performed", `${disposition}${note === undefined ? "" : `: ${note}`}`),
        },
        ctx.now,
      );
    }
    return disposed;
  });
  if (record === undefined) return refuse("operator_not_found", `no anomaly flag ${id}`);
  return anomalyView(record);
};
