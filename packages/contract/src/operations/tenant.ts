import { Type } from "@sinclair/typebox";
import { defineOperation } from "../operation.js";
import { AuditPage } from "../records/audit.js";
import {
  CREDENTIAL_NAME_PATTERN,
  CredentialIssued,
  CredentialRequest,
  CredentialRevocationReceipt,
  CredentialsPage,
} from "../records/credentials.js";
import { A, K } from "../refusal-codes.js";
import { PageQuery } from "../schema-helpers.js";

/** Tenant, tokens, usage, credentials, audit (spec table of the same name). */
export const TENANT_OPERATIONS = [
  // TODO(helper): tenant.settings.get … usage.export go here, in the spec's order.
  defineOperation({
    id: "credentials.create",
    method: "POST",
    path: "/api/credentials",
    summary: "Mint an agent credential (human admin through a device token only); the value is shown once.",
    tag: "credentials",
    security: { kind: "tenant", scope: "admin", human: true },
    request: { body: { encoding: "json", schema: CredentialRequest } },
    response: { encoding: "json", schema: CredentialIssued },
    refusals: [...A, ...K, "human_principal_required", "invalid_request", "conflict"],
    keyed: true,
  }),
  defineOperation({
    id: "credentials.list",
    method: "GET",
    path: "/api/credentials",
    summary: "List the tenant's agent credentials, live and revoked.",
    tag: "credentials",
    security: { kind: "tenant", scope: "credentials" },
    request: { query: Type.Object(PageQuery(), { additionalProperties: false }) },
    response: { encoding: "json", schema: CredentialsPage },
    refusals: [...A, "invalid_request"],
    keyed: false,
    mcp: { tool: "credentials_list", scope: "credentials" },
  }),
  defineOperation({
    id: "credentials.revoke",
    method: "POST",
    path: "/api/credentials/{name}/revocation",
    summary: "Revoke an agent credential by name; its next use is refused credential_revoked.",
    tag: "credentials",
    security: { kind: "tenant", scope: "credentials" },
    request: {
      params: Type.Object({ name: Type.String({ pattern: CREDENTIAL_NAME_PATTERN }) }, { additionalProperties: false }),
    },
    response: { encoding: "json", schema: CredentialRevocationReceipt },
    refusals: [...A, ...K, "not_found"],
    keyed: true,
    mcp: { tool: "credentials_revoke", scope: "credentials" },
  }),
  defineOperation({
    id: "audit.list",
    method: "GET",
    path: "/api/audit",
    summary: "The tenant's audit trail, newest first.",
    tag: "audit",
    security: { kind: "tenant", scope: "read" },
    request: { query: Type.Object(PageQuery(), { additionalProperties: false }) },
    response: { encoding: "json", schema: AuditPage },
    refusals: [...A, "invalid_request"],
    keyed: false,
    mcp: { tool: "audit_list", scope: "read" },
  }),
];
