import { Type } from "@sinclair/typebox";
import { defineOperation, defineOperatorOperation, OPERATOR_REFUSALS } from "../operation.js";
import {
  FlagDispositionRequest,
  OPERATOR_IDENTIFIER_PATTERN,
  OperatingStates,
  OperatorAnomalies,
  OperatorAnomaly,
  OperatorTenantList,
  PlatformAnomalies,
  PlatformAnomaly,
  PlatformAnomalyDispositionRequest,
  TENANT_IDENTIFIER_PATTERN,
  TenantControls,
  TenantControlUpdate,
} from "../records/operator.js";

const tenantParams = Type.Object(
  { tenant: Type.String({ pattern: TENANT_IDENTIFIER_PATTERN, description: "The tenant's identifier." }) },
  { additionalProperties: false },
);
const anomalyParams = Type.Object(
  { id: Type.String({ pattern: OPERATOR_IDENTIFIER_PATTERN, description: "The anomaly's identifier." }) },
  { additionalProperties: false },
);

/** Operator session, tenant controls, anomalies, platform states. */
export const OPERATOR_SESSION_TENANTS_ANOMALIES_OPERATIONS = [
  defineOperation({
    id: "operator.session.create",
    method: "POST",
    path: "/operator/auth/session",
    summary: "Open an operator session with the operator bootstrap credential as a bearer token.",
    tag: "operator-session",
    security: { kind: "operator-bootstrap" },
    request: {},
    response: { encoding: "none", description: "No body; sets the `kiln_operator_session` cookie." },
    refusals: [...OPERATOR_REFUSALS],
    keyed: false,
  }),
  defineOperatorOperation({
    id: "operator.session.delete",
    method: "DELETE",
    path: "/operator/auth/session",
    summary: "End the operator session named by the cookie.",
    tag: "operator-session",
    request: {},
    response: { encoding: "none", description: "No body; clears the `kiln_operator_session` cookie." },
  }),
  defineOperatorOperation({
    id: "operator.tenants.list",
    method: "GET",
    path: "/operator/api/tenants",
    summary: "List the tenants by identifier: name, creation, members, whether suspended.",
    tag: "operator-tenants",
    request: {
      query: Type.Object(
        { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 200 })) },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: OperatorTenantList },
    extension: {
      reason:
        "The operator console's Tenants page lists tenants (issue 36); the spec opens a tenant's controls by its identifier only.",
    },
  }),
  defineOperatorOperation({
    id: "operator.tenants.controls.get",
    method: "GET",
    path: "/operator/api/tenants/{tenant}",
    summary: "Read a tenant's controls: concurrency, storage, bandwidth, rate card, suspension.",
    tag: "operator-tenants",
    request: { params: tenantParams },
    response: { encoding: "json", schema: TenantControls },
  }),
  defineOperatorOperation({
    id: "operator.tenants.controls.set",
    method: "POST",
    path: "/operator/api/tenants/{tenant}",
    summary: "Change a tenant's controls at the version read; audited.",
    tag: "operator-tenants",
    request: { params: tenantParams, body: { encoding: "json", schema: TenantControlUpdate } },
    response: { encoding: "json", schema: TenantControls },
    extraRefusals: ["invalid_request", "conflict"],
  }),
  defineOperatorOperation({
    id: "operator.anomalies.list",
    method: "GET",
    path: "/operator/api/anomalies",
    summary: "List anomaly flags with their evidence and disposition.",
    tag: "operator-anomalies",
    request: {},
    response: { encoding: "json", schema: OperatorAnomalies },
  }),
  defineOperatorOperation({
    id: "operator.anomalies.disposition",
    method: "POST",
    path: "/operator/api/anomalies/{id}/disposition",
    summary: "Record a disposition of an anomaly flag; audited.",
    tag: "operator-anomalies",
    request: { params: anomalyParams, body: { encoding: "json", schema: FlagDispositionRequest } },
    response: { encoding: "json", schema: OperatorAnomaly },
    extraRefusals: ["invalid_request"],
  }),
  defineOperatorOperation({
    id: "operator.anomalies.platform.list",
    method: "GET",
    path: "/operator/api/anomalies/platform",
    summary: "List platform anomalies with evidence, the recovery available for the host and its ledger.",
    tag: "operator-anomalies",
    request: {},
    response: { encoding: "json", schema: PlatformAnomalies },
  }),
  defineOperatorOperation({
    id: "operator.anomalies.platform.disposition",
    method: "POST",
    path: "/operator/api/anomalies/platform/{id}/disposition",
    summary: "Record a disposition of a platform anomaly; changes no job, attempt, host or admission.",
    tag: "operator-anomalies",
    request: { params: anomalyParams, body: { encoding: "json", schema: PlatformAnomalyDispositionRequest } },
    response: { encoding: "json", schema: PlatformAnomaly },
    extraRefusals: ["invalid_request"],
  }),
  defineOperatorOperation({
    id: "operator.platform.states",
    method: "GET",
    path: "/operator/api/platform/states",
    summary: "The four operating states and each host's capacity observation.",
    tag: "operator-platform",
    request: {},
    response: { encoding: "json", schema: OperatingStates },
  }),
];
