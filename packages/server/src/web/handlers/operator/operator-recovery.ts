import {
  appendOperatorAuditEntry,
  type HostRecoveryInvocationResult,
  listHostRecoveries,
  readHostOperationState,
  setHostRecoveryPolicy,
} from "@kiln/storage";
import {
  admissionView,
  hostOperationView,
  incidentView,
  invocationView,
  policyView,
  recoveryView,
} from "../../../domain/hosts/recovery/host-recovery-views.js";
import { invokeRecovery } from "../../../domain/hosts/recovery/invoke-recovery.js";
import { recoveryConfirmationOf } from "../../../domain/hosts/recovery/recovery-confirmation.js";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/**
 * operator.hosts.recovery.get / invoke / policy.set (spec operator rules 3 and 4). Recovery
 * steps never run here: an invocation is recorded, and the host operator on the host claims it
 * and runs it (hosts/recovery/, host/src/operator/). Reading mutates nothing.
 */

/** operator.hosts.recovery.get: admission, host operation, policy, incident, recovery with ledger, invocations. */
export const getHostRecovery: Handler<"operator.hosts.recovery.get"> = async (ctx) => {
  const hostId = ctx.params.id;
  const state = await readHostOperationState(ctx.db, hostId);
  if (state === undefined) return refuse("not_found", `no host ${hostId}`);
  const recoveries = await listHostRecoveries(ctx.db, { hostId });
  const selected =
    ctx.query.operation === undefined ? recoveries[0] : recoveries.find((r) => r.id === ctx.query.operation);
  if (ctx.query.operation !== undefined && selected === undefined) {
    return refuse("not_found", `host ${hostId} has no recovery ${ctx.query.operation}`);
  }
  return {
    host: hostId,
    admission: admissionView(state),
    host_operation: hostOperationView(state, recoveries[0]),
    policy: policyView(state),
    incident:
      state.openIncident === null
        ? null
        : {
            id: state.openIncident.id,
            automatic_recoveries_spent: state.openIncident.automaticRecoveriesSpent,
            awaiting_operator: state.openIncident.awaitingOperator,
            awaiting_reason: state.openIncident.awaitingReason,
            detail: incidentView(state.openIncident),
          },
    recovery: selected === undefined ? null : recoveryView(selected),
    invocations: recoveries.map(invocationView),
    confirmation:
      state.readiness === null || !state.readiness.recoveryBindingLoaded
        ? null
        : recoveryConfirmationOf(state.readiness.providerServiceName),
  };
};

/**
 * operator.hosts.recovery.invoke (rule 3): the exact confirmation for the host's bound provider
 * (`invalid_request` otherwise), the host operation revision read (`conflict` when moved past);
 * a retry with a recorded request replays it; while a recovery of the host is open or running it
 * is returned (`in_progress`). Surface and operator are recorded, and the invocation audited.
 */
export const invokeHostRecoveryHandler: Handler<"operator.hosts.recovery.invoke"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const hostId = ctx.params.id;
  const body = ctx.body;
  const state = await readHostOperationState(ctx.db, hostId);
  if (state === undefined) return refuse("not_found", `no host ${hostId}`);
  if (state.readiness === null || !state.readiness.recoveryBindingLoaded) {
    return refuse(
      "conflict",
      `host ${hostId} has no host operator with a loaded recovery binding; no recovery can run there`,
    );
  }
  const expected = recoveryConfirmationOf(state.readiness.providerServiceName);
  if (body.confirmation !== expected) {
    return refuse("invalid_request", `body.confirmation must be exactly ${expected}`);
  }
  if (body.expected_revision === undefined) {
    return refuse("invalid_request", "body.expected_revision must name the host operation revision read");
  }
  if (body.request === undefined) {
    return refuse("invalid_request", "body.request must name the request, so a retry replays it");
  }
  if (body.rescue_ssh_public_key !== undefined && body.rescue_read !== true) {
    return refuse("invalid_request", "body.rescue_ssh_public_key is only given with rescue_read");
  }
  const surface = body.surface ?? "operator_api";
  const describe = (r: HostRecoveryInvocationResult) => {
    switch (r.kind) {
      case "recorded":
        return `recorded ${r.recovery.id} (request ${body.request}, surface ${surface})`;
      case "replayed":
        return `replayed ${r.recovery.id} for request ${body.request}`;
      case "in_progress":
        return `${r.recovery.id} is ${r.recovery.state}; returned instead`;
      case "conflict":
        return `expected_revision ${body.expected_revision} is not the host operation revision ${r.operationRevision}`;
      case "not_found":
        return `no ${r.what}`;
    }
  };
  const result = await invokeRecovery(
    ctx.deps.storage,
    {
      hostId,
      incidentId: body.incident ?? null,
      request: body.request,
      surface,
      operator: operator.principal,
      rescueRead: body.rescue_read ?? false,
      rescueSshPublicKey: body.rescue_ssh_public_key ?? null,
      expectedRevision: body.expected_revision,
      automatic: false,
      now: ctx.now,
    },
    {
      actor: operator.principal,
      value: (r) => operatorAuditValue(ctx.op.id, r.kind === "recorded" ? "performed" : r.kind, describe(r)),
    },
  );
  switch (result.kind) {
    case "not_found":
      return refuse(
        "not_found",
        result.what === "host" ? `no host ${hostId}` : `host ${hostId} has no incident ${body.incident}`,
      );
    case "conflict":
      return refuse("conflict", describe(result));
    case "in_progress":
      return {
        outcome: "in_progress",
        operation: result.recovery.id,
        state: result.recovery.state === "recorded" ? "open" : "running",
      };
    case "replayed":
    case "recorded":
      return {
        outcome: "recorded",
        operation: result.recovery.id,
        request: result.recovery.request,
        surface: result.recovery.surface,
        operator: result.recovery.operator,
        ...(result.kind === "replayed" ? { replayed: true } : {}),
      };
  }
};

/**
 * operator.hosts.recovery.policy.set (rule 4): `automatic` at the policy revision read
 * (absent only while none is set; `conflict` otherwise). Audited.
 */
export const setHostRecoveryPolicyHandler: Handler<"operator.hosts.recovery.policy.set"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const hostId = ctx.params.id;
  const { automatic, expected_revision } = ctx.body;
  const result = await ctx.deps.storage.transaction(async (trx) => {
    const r = await setHostRecoveryPolicy(trx, {
      hostId,
      automatic,
      expectedRevision: expected_revision ?? null,
      actor: operator.principal,
      now: ctx.now,
    });
    if (r.kind !== "not_found") {
      await appendOperatorAuditEntry(
        trx,
        {
          actor: operator.principal,
          target: `host-recovery-policy:${hostId}`,
          value: operatorAuditValue(
            ctx.op.id,
            r.kind === "changed" ? "performed" : "conflict",
            r.kind === "changed" ? `automatic ${automatic} at revision ${r.revision}` : conflictOf(r.revision),
          ),
        },
        ctx.now,
      );
    }
    return r;
  });
  function conflictOf(revision: number | null): string {
    return revision === null
      ? `no policy is set for host ${hostId}; omit expected_revision`
      : `expected_revision ${expected_revision ?? "(absent)"} is not the policy revision ${revision}`;
  }
  switch (result.kind) {
    case "not_found":
      return refuse("not_found", `no host ${hostId}`);
    case "conflict":
      return refuse("conflict", conflictOf(result.revision));
    case "changed":
      return {
        host: hostId,
        automatic: result.automatic,
        revision: result.revision,
        changed_by: result.changedBy,
        changed_at: result.changedAt,
      };
  }
};
