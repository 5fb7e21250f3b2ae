import {
  appendOperatorAuditEntry,
  disposePlatformAnomaly,
  listHostRecoveries,
  listPlatformAnomalies,
  type PlatformAnomalyRecord,
  readHostOperationState,
  type StorageOrTransaction,
} from "@kiln/storage";
import { ledgerView, recoveryAvailableView } from "../../../domain/hosts/recovery/host-recovery-views.js";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/**
 * operator.anomalies.platform.list / disposition: what the impairment detector raised
 * (hosts/impairment/), each with the recovery available for its host and, once begun, that
 * recovery's step ledger. A disposition writes the anomaly alone: no job, attempt, host or
 * admission changes (rule 7). An unknown anomaly is `operator_not_found` (the operation's
 * refusals name no `not_found`).
 */

async function anomalyView(db: StorageOrTransaction, anomaly: PlatformAnomalyRecord) {
  const state = await readHostOperationState(db, anomaly.hostId);
  const [begun] = await listHostRecoveries(db, { hostId: anomaly.hostId, incidentId: anomaly.incidentId });
  return {
    id: anomaly.id,
    kind: anomaly.kind,
    host: anomaly.hostId,
    raised_at: anomaly.raisedAt,
    evidence: anomaly.evidence,
    recovery: state === undefined ? null : recoveryAvailableView(state, begun),
    ...(begun === undefined ? {} : { step_ledger: ledgerView(begun) }),
    disposition:
      anomaly.disposition === null
        ? null
        : {
            disposition: anomaly.disposition.disposition,
            note: anomaly.disposition.note,
            disposed_by: anomaly.disposition.disposedBy,
            disposed_at: anomaly.disposition.disposedAt,
          },
    incident: anomaly.incidentId,
  };
}

/** operator.anomalies.platform.list: undisposed first, then newest first. Mutates nothing. */
export const listPlatformAnomaliesHandler: Handler<"operator.anomalies.platform.list"> = async (ctx) => {
  const anomalies = await listPlatformAnomalies(ctx.db);
  const views = [];
  for (const anomaly of anomalies) views.push(await anomalyView(ctx.db, anomaly));
  return views;
};

/** operator.anomalies.platform.disposition: records the disposition and note; audited; nothing else moves. */
export const disposePlatformAnomalyHandler: Handler<"operator.anomalies.platform.disposition"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const id = ctx.params.id;
  const { disposition, note } = ctx.body;
  const found = await ctx.deps.storage.transaction(async (trx) => {
    const disposed = await disposePlatformAnomaly(trx, {
      id,
      disposition,
      note: note ?? null,
      actor: operator.principal,
      now: ctx.now,
    });
    if (disposed) {
      await appendOperatorAuditEntry(
        trx,
        {
          actor: operator.principal,
          target: `platform-anomaly:${id}`,
          value: operatorAuditValue(ctx.op.id, "performed", `${disposition}${note === undefined ? "" : `: ${note}`}`),
        },
        ctx.now,
      );
    }
    return disposed;
  });
  if (!found) return refuse("operator_not_found", `no platform anomaly ${id}`);
  const [anomaly] = await listPlatformAnomalies(ctx.deps.storage, { id });
  if (anomaly === undefined) return refuse("operator_not_found", `no platform anomaly ${id}`);
  return anomalyView(ctx.deps.storage, anomaly);
};
