import { Type } from "@sinclair/typebox";
import { defineOperatorOperation } from "../operation.js";
import { AuditRefusal, OperatorAudit } from "../records/operator.js";

const sequenceParams = Type.Object(
  { sequence: Type.Integer({ minimum: 1, description: "The operator audit entry's sequence number." }) },
  { additionalProperties: false },
);

/** Operator audit. */
export const OPERATOR_AUDIT_OPERATIONS = [
  defineOperatorOperation({
    id: "operator.audit.list",
    method: "GET",
    path: "/operator/api/audit",
    summary: "The operator audit trail, newest first.",
    tag: "operator-audit",
    request: {},
    response: { encoding: "json", schema: OperatorAudit },
  }),
  defineOperatorOperation({
    id: "operator.audit.export",
    method: "GET",
    path: "/operator/api/audit/export",
    summary: "Export the whole operator audit trail.",
    tag: "operator-audit",
    request: {},
    response: { encoding: "json", schema: OperatorAudit },
  }),
  defineOperatorOperation({
    id: "operator.audit.refuse_patch",
    method: "PATCH",
    path: "/operator/api/audit/{sequence}",
    summary: "An attempt to edit an operator audit entry: always refused, and the attempt is audited.",
    tag: "operator-audit",
    request: { params: sequenceParams },
    response: { encoding: "json", schema: AuditRefusal },
    extraRefusals: ["conflict"],
  }),
  defineOperatorOperation({
    id: "operator.audit.refuse_delete",
    method: "DELETE",
    path: "/operator/api/audit/{sequence}",
    summary: "An attempt to delete an operator audit entry: always refused, and the attempt is audited.",
    tag: "operator-audit",
    request: { params: sequenceParams },
    response: { encoding: "json", schema: AuditRefusal },
    extraRefusals: ["conflict"],
  }),
];
