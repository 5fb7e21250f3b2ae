import { appendOperatorAuditEntry, approveDestructiveStep, closeHostIncident, readHostIncident } from "@kiln/storage";
import { incidentView } from "../../../domain/hosts/recovery/host-recovery-views.js";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/**
 * operator.hosts.incidents.approve / close (spec operator rules 5 and 6). An approval names
 * host, incident and destructive step; without it the host operator's destructive step waits
 * (storage host-recovery/begin-host-recovery-step.ts). A close leaves admission as it stands.
 * Both audited in the transaction that writes them.
 */

/** operator.hosts.incidents.approve: approves one destructive step for this host and incident. */
export const approveHostIncidentStep: Handler<"operator.hosts.incidents.approve"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const { id: hostId, incident: incidentId } = ctx.params;
  const step = ctx.body.step;
  const result = await ctx.deps.storage.transaction(async (trx) => {
    const r = await approveDestructiveStep(trx, { hostId, incidentId, step, actor: operator.principal, now: ctx.now });
    if (r.kind !== "not_found") {
      await appendOperatorAuditEntry(
        trx,
        {
          actor: operator.principal,
          target: `host-incident:${hostId}/${incidentId}`,
          value: operatorAuditValue(
            ctx.op.id,
            r.kind === "approved" ? "performed" : "conflict",
            r.kind === "approved" ? `${r.newly ? "approved" : "already approved"} ${step}` : r.detail,
          ),
        },
        ctx.now,
      );
    }
    return r;
  });
  switch (result.kind) {
    case "not_found":
      return refuse("not_found", `host ${hostId} has no incident ${incidentId}`);
    case "conflict":
      return refuse("conflict", result.detail);
    case "approved":
      return {
        host: hostId,
        incident: incidentId,
        step,
        approved_by: result.approvedBy,
        approved_at: result.approvedAt,
      };
  }
};

/** operator.hosts.incidents.close: closes an open incident at the revision read; admission stays as it stands. */
export const closeHostIncidentHandler: Handler<"operator.hosts.incidents.close"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const { id: hostId, incident: incidentId } = ctx.params;
  const expected = ctx.body.expected_revision;
  const result = await ctx.deps.storage.transaction(async (trx) => {
    const r = await closeHostIncident(trx, {
      hostId,
      incidentId,
      expectedRevision: expected,
      actor: operator.principal,
      now: ctx.now,
    });
    if (r.kind !== "not_found") {
      await appendOperatorAuditEntry(
        trx,
        {
          actor: operator.principal,
          target: `host-incident:${hostId}/${incidentId}`,
          value: operatorAuditValue(
            ctx.op.id,
            r.kind === "closed" ? "performed" : "conflict",
            r.kind === "closed" ? "closed; admission left as it stands" : conflictOf(r.state, r.revision),
          ),
        },
        ctx.now,
      );
    }
    return r;
  });
  function conflictOf(state: "open" | "closed", revision: number): string {
    return state === "closed"
      ? `incident ${incidentId} is already closed (revision ${revision})`
      : `expected_revision ${expected} is not incident ${incidentId}'s revision ${revision}; re-read and close again`;
  }
  if (result.kind === "not_found") return refuse("not_found", `host ${hostId} has no incident ${incidentId}`);
  if (result.kind === "conflict") return refuse("conflict", conflictOf(result.state, result.revision));
  const incident = await readHostIncident(ctx.deps.storage, { hostId, incidentId });
  if (incident === undefined) return refuse("not_found", `host ${hostId} has no incident ${incidentId}`);
  return incidentView(incident);
};
