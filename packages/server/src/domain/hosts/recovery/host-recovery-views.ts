import type { ResponseDocumentOf } from "@kiln/contract";
import type { HostIncidentRecord, HostOperationState, HostRecoveryRecord } from "@kiln/storage";
import { recoveryConfirmationOf } from "./recovery-confirmation.js";

/**
 * The operator's views of a host's recovery state (HostRecovery, HostIncident, the anomaly's
 * recovery and ledger), built from storage records. Shared by the recovery, incident,
 * activation and platform anomaly handlers.
 */

type HostRecoveryView = ResponseDocumentOf<"operator.hosts.recovery.get">;
type Surface = HostRecoveryView["invocations"][number]["surface"];

export function admissionView(state: HostOperationState): HostRecoveryView["admission"] {
  return {
    open: state.admission.open,
    closed_by: state.admission.closedBy,
    closed_at: state.admission.closedAt,
    closure_reason: state.admission.closureReason,
  };
}

/**
 * The host operation: the open or running recovery (held by the host operator instance running
 * it, or by whoever invoked it until claimed), else the newest recovery, else `idle`. Its
 * revision is the one a recovery invocation names as `expected_revision`; it is shown even when
 * no recovery exists, so the first invocation can name it.
 */
export function hostOperationView(state: HostOperationState, newest: HostRecoveryRecord | undefined) {
  const open = newest !== undefined && (newest.state === "recorded" || newest.state === "running");
  return {
    operation: newest?.id ?? "idle",
    holder: open ? (newest.holder ?? newest.operator) : null,
    revision: state.operationRevision,
    state: newest === undefined ? "idle" : newest.state,
  };
}

export function policyView(state: HostOperationState): HostRecoveryView["policy"] {
  if (state.policy === null) return null;
  return {
    host: state.hostId,
    automatic: state.policy.automatic,
    revision: state.policy.revision,
    ...(state.policy.changedBy === null ? {} : { changed_by: state.policy.changedBy }),
    ...(state.policy.changedAt === null ? {} : { changed_at: state.policy.changedAt }),
  };
}

export function ledgerView(recovery: HostRecoveryRecord) {
  return recovery.steps.map((s) => ({
    step: s.step,
    state: s.state,
    destructive: s.destructive,
    started_at: s.startedAt,
    finished_at: s.finishedAt,
    ...(s.detail === null ? {} : { detail: s.detail }),
  }));
}

export function recoveryView(recovery: HostRecoveryRecord) {
  return {
    operation: recovery.id,
    state: recovery.state,
    began_by: recovery.surface === "automatic" ? "system" : recovery.operator,
    began_at: recovery.invokedAt,
    steps: ledgerView(recovery),
    surface: recovery.surface,
    incident: recovery.incidentId,
    rescue_read: recovery.rescueRead,
    holder: recovery.holder,
    claimed_at: recovery.claimedAt,
    finished_at: recovery.finishedAt,
    outcome_detail: recovery.outcomeDetail,
  };
}

export function invocationView(recovery: HostRecoveryRecord) {
  return {
    request: recovery.request,
    operation: recovery.id,
    operator: recovery.operator,
    surface: recovery.surface as Surface,
    ...(recovery.incidentId === null ? {} : { incident: recovery.incidentId }),
    at: recovery.invokedAt,
  };
}

export function incidentView(incident: HostIncidentRecord): ResponseDocumentOf<"operator.hosts.incidents.close"> {
  return {
    id: incident.id,
    host: incident.hostId,
    state: incident.state,
    revision: incident.revision,
    opened_at: incident.openedAt,
    closed_at: incident.closedAt,
    closed_by: incident.closedBy,
    automatic_recoveries_spent: incident.automaticRecoveriesSpent,
    awaiting_operator: incident.awaitingOperator,
    awaiting_reason: incident.awaitingReason,
    approvals: incident.approvals.map((a) => ({
      step: a.step as ResponseDocumentOf<"operator.hosts.incidents.close">["approvals"][number]["step"],
      approved_by: a.approvedBy,
      approved_at: a.approvedAt,
    })),
  };
}

/** The recovery available for a host: its confirmation, and the recovery once begun. */
export function recoveryAvailableView(state: HostOperationState, begun: HostRecoveryRecord | undefined) {
  if (state.readiness === null || !state.readiness.recoveryBindingLoaded) return null;
  return {
    kind: "recover-boot",
    confirmation: recoveryConfirmationOf(state.readiness.providerServiceName),
    operation: begun?.id ?? null,
    ...(begun === undefined ? {} : { state: begun.state }),
    provider: state.readiness.provider,
    expected_revision: state.operationRevision,
  };
}
