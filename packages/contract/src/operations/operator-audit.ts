import { Type } from "@sinclair/typebox";
import { defineOperation } from "../operation.js";
import { AuditRefusal, OperatorAudit } from "../records/operator.js";

const sequenceParams = Type.Object(
  { sequence: Type.Integer({ minimum: 1, description: "The operator audit entry's sequence number." }) },
  { additionalProperties: false },
);

/** Operator audit. */
export const OPERATOR_AUDIT_OPERATIONS = [
  defineOperation({
    id: "operator.audit.list",
    method: "GET",
    path: "/operator/api/audit",
    summary: "The operator audit trail, newest first.",
    tag: "operator-audit",
    security: { kind: "operator" },
    request: {},
    response: { encoding: "json", schema: OperatorAudit },
    refusals: ["operator_not_found", "unavailable"],
    keyed: false,
  }),
  defineOperation({
    id: "operator.audit.export",
    method: "GET",
    path: "/operator/api/audit/export",
    summary: "Export the whole operator audit trail.",
    tag: "operator-audit",
    security: { kind: "operator" },
    request: {},
    response: { encoding: "json", schema: OperatorAudit },
    refusals: ["operator_not_found", "unavailable"],
    keyed: false,
  }),
  defineOperation({
    id: "operator.audit.refuse_patch",
    method: "PATCH",
    path: "/operator/api/audit/{sequence}",
    summary: "An attempt to edit an operator audit entry: always refused, and the attempt is audited.",
    tag: "operator-audit",
    security: { kind: "operator" },
    request: { params: sequenceParams },
    response: { encoding: "json", schema: AuditRefusal },
    refusals: ["operator_not_found", "unavailable", "conflict"],
    keyed: false,
  }),
  defineOperation({
    id: "operator.audit.refuse_delete",
    method: "DELETE",
    path: "/operator/api/audit/{sequence}",
    summary: "An attempt to delete an operator audit entry: always refused, and the attempt is audited.",
    tag: "operator-audit",
    security: { kind: "operator" },
    request: { params: sequenceParams },
    response: { encoding: "json", schema: AuditRefusal },
    refusals: ["operator_not_found", "unavailable", "conflict"],
    keyed: false,
  }),
];
