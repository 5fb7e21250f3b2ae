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
import { TenantId } from "../records/identity.js";
import { JobEvent } from "../records/jobs.js";
import {
  CLI_TOKEN_ID_PATTERN,
  PERIOD_PATTERN,
  RegistryCredentialReceipt,
  RegistryCredentialReplacement,
  RevocationReceipt,
  SettingReceipt,
  SettingWrite,
  TenantSettings,
  TokensPage,
  Usage,
  UsageExport,
} from "../records/settings.js";
import { A, K } from "../refusal-codes.js";
import { PageQuery } from "../schema-helpers.js";

const Period = () =>
  Type.Optional(
    Type.String({
      pattern: PERIOD_PATTERN,
      description: "Calendar month (UTC) `YYYY-MM`; default the current one.",
    }),
  );

const PeriodQuery = () => Type.Object({ period: Period() }, { additionalProperties: false });

/** Tenant, tokens, usage, credentials, audit (spec table of the same name). */
export const TENANT_OPERATIONS = [
  defineOperation({
    id: "tenant.settings.get",
    method: "GET",
    path: "/api/tenant/settings",
    summary: "The tenant's settings at their version, with operator-set limits beside consumption.",
    tag: "tenant",
    security: { kind: "tenant", scope: "read" },
    request: {},
    response: { encoding: "json", schema: TenantSettings },
    refusals: [...A],
    keyed: false,
    mcp: { tool: "tenant_settings_get", scope: "read" },
  }),
  defineOperation({
    id: "tenant.settings.write",
    method: "POST",
    path: "/api/tenant/settings",
    summary: "Write tenant settings at the version observed; operator-controlled settings are refused.",
    description:
      "Accepts default_size, allowed_sizes, default_toolchain, wall_clock_ceiling_seconds, artifact_retention_days, " +
      "log_retention_days and agents_may_submit in `changes`. " +
      "A write naming an operator-controlled setting is refused operator_controlled and the refusal is audited.",
    tag: "tenant",
    security: { kind: "tenant", scope: "settings" },
    request: { body: { encoding: "json", schema: SettingWrite } },
    response: { encoding: "json", schema: SettingReceipt },
    refusals: [...A, ...K, "invalid_request", "stale_version", "operator_controlled"],
    keyed: true,
    mcp: { tool: "tenant_settings_write", scope: "settings" },
  }),
  defineOperation({
    id: "tenant.registry_credential.replace",
    method: "POST",
    path: "/api/tenant/registry-credentials",
    summary: "Replace a private registry credential on every host; the prior value is removed once all acknowledge.",
    tag: "tenant",
    security: { kind: "tenant", scope: "credentials" },
    request: { body: { encoding: "json", schema: RegistryCredentialReplacement } },
    response: { encoding: "json", schema: RegistryCredentialReceipt },
    refusals: [...A, ...K, "confirmation_required", "invalid_request", "upstream_failed"],
    keyed: true,
    mcp: { tool: "tenant_registry_credential_replace", scope: "credentials" },
  }),
  defineOperation({
    id: "cli_tokens.list",
    method: "GET",
    path: "/api/cli/tokens",
    summary: "List the calling person's CLI device tokens, live and revoked (person's device token only).",
    tag: "cli-tokens",
    security: { kind: "tenant", scope: "credentials", human: true },
    request: { query: Type.Object(PageQuery(), { additionalProperties: false }) },
    response: { encoding: "json", schema: TokensPage },
    refusals: [...A, "human_principal_required", "invalid_request"],
    keyed: false,
  }),
  defineOperation({
    id: "cli_tokens.revoke",
    method: "POST",
    path: "/api/cli/tokens/{id}/revocation",
    summary: "Revoke a CLI device token (person's device token only); its next request is refused.",
    tag: "cli-tokens",
    security: { kind: "tenant", scope: "credentials", human: true },
    request: {
      params: Type.Object(
        { id: Type.String({ pattern: CLI_TOKEN_ID_PATTERN, description: "The token's id." }) },
        { additionalProperties: false },
      ),
    },
    response: { encoding: "json", schema: RevocationReceipt },
    refusals: [...A, ...K, "human_principal_required", "not_found"],
    keyed: true,
  }),
  defineOperation({
    id: "cli.tenant",
    method: "GET",
    path: "/api/cli/tenant",
    summary: "The tenant the presented credential acts for.",
    tag: "cli",
    security: { kind: "tenant", scope: "read" },
    request: {},
    response: { encoding: "json", schema: TenantId },
    refusals: [...A],
    keyed: false,
    mcp: { tool: "cli_tenant", scope: "read" },
  }),
  defineOperation({
    id: "cli.events",
    method: "GET",
    path: "/api/cli/events",
    summary: "Server-sent tenant job status events, resumable from a durable sequence.",
    tag: "cli",
    security: { kind: "tenant", scope: "read" },
    request: {
      query: Type.Object(
        {
          after: Type.Optional(
            Type.Integer({
              minimum: 0,
              description:
                "The durable sequence already observed; the stream sends events with a greater sequence. " +
                "Absent: only events after the stream opens.",
            }),
          ),
        },
        { additionalProperties: false },
      ),
    },
    response: {
      encoding: "sse",
      description: "Tenant job status events in durable-sequence order; each frame's data is one JobEvent.",
      event: JobEvent,
    },
    refusals: [...A, "invalid_request"],
    keyed: false,
  }),
  defineOperation({
    id: "usage.report",
    method: "GET",
    path: "/api/usage",
    summary: "The tenant's usage of a month, per day and per repository, priced where a rate card is set.",
    tag: "usage",
    security: { kind: "tenant", scope: "read" },
    request: { query: PeriodQuery() },
    response: { encoding: "json", schema: Usage },
    refusals: [...A, "invalid_request"],
    keyed: false,
    mcp: { tool: "usage_report", scope: "read" },
  }),
  defineOperation({
    id: "usage.export",
    method: "GET",
    path: "/api/usage/export",
    summary: "The month's per-second metering records and adjustments; totals equal the usage report's.",
    description:
      "Keyset-paged JSON (the response encoding is one JSON document per request): follow next_cursor until it " +
      "is null. The first page carries the period's totals as of as_of; the cursor keeps as_of, so later pages " +
      "list only what had settled by then and the pages together sum to those totals. Each page is read with " +
      "bounded memory, however large the period. With a cursor, `period` must be the cursor's own or absent.",
    tag: "usage",
    security: { kind: "tenant", scope: "read", cookie: true },
    request: {
      query: Type.Object({ period: Period(), ...PageQuery(1000) }, { additionalProperties: false }),
    },
    response: { encoding: "json", schema: UsageExport },
    refusals: [...A, "invalid_request"],
    keyed: false,
    mcp: { tool: "usage_export", scope: "read" },
  }),
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
    shownOnce: ["credential"],
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
