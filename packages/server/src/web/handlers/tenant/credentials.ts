import type { Scope } from "@kiln/contract";
import {
  type AgentCredentialRow,
  appendAuditEntry,
  createAgentCredential,
  listAgentCredentials,
  revokeAgentCredential,
} from "@kiln/storage";
import { hashToken, mintToken } from "../../../domain/identity/token-format.js";
import { refuse } from "../../../domain/refusal.js";
import { type LastUsedRecorder, latestUse } from "../../auth/last-used-recorder.js";
import { type Handler, principalOf } from "../../http/handler.js";
import { pageRequestOf } from "./page-request.js";

const DEFAULT_REQUESTS_PER_MINUTE = 600;

/** `lastUsed` supplies this process's uses not yet written, so a use shows at once. */
function credentialView(row: AgentCredentialRow, lastUsed: LastUsedRecorder | undefined) {
  return {
    name: row.name,
    principal: `agent:${row.name}`,
    scopes: JSON.parse(row.scopes) as Scope[],
    created_by: row.created_by,
    created_at: row.created_at,
    expires_at: row.expires_at,
    last_used_at: latestUse(row.last_used_at, lastUsed?.pendingAgentCredentialUse(row.token_hash)),
    revoked_at: row.revoked_at,
    revoked_by: row.revoked_by,
    requests_per_minute: row.requests_per_minute,
  };
}

/** credentials.create: a human admin mints an agent credential; the value is shown once. */
export const createCredential: Handler<"credentials.create"> = async (ctx) => {
  const principal = principalOf(ctx);
  const body = ctx.body;
  const value = mintToken("agent");
  const expiresAt = new Date(ctx.now.getTime() + body.expires_in_seconds * 1000).toISOString();
  const row = await createAgentCredential(
    ctx.db,
    {
      tenantId: principal.tenantId,
      name: body.name,
      tokenHash: hashToken(value),
      scopes: body.scopes,
      createdBy: principal.principal,
      expiresAt,
      requestsPerMinute: body.requests_per_minute ?? DEFAULT_REQUESTS_PER_MINUTE,
    },
    ctx.clock.now(),
  );
  if (row === undefined) refuse("conflict", `a live credential named ${body.name} already exists`);
  await appendAuditEntry(
    ctx.db,
    {
      tenantId: principal.tenantId,
      actor: principal.principal,
      target: `credential:${body.name}`,
      value: `created with scopes ${body.scopes.join(",")}, expires ${expiresAt}, ${row.requests_per_minute} requests/minute`,
    },
    ctx.clock.now(),
  );
  return { credential: value, view: credentialView(row, ctx.deps.lastUsed) };
};

export const listCredentials: Handler<"credentials.list"> = async (ctx) => {
  const principal = principalOf(ctx);
  const page = await listAgentCredentials(ctx.db, { tenantId: principal.tenantId, ...pageRequestOf(ctx.query) });
  return { credentials: page.rows.map((row) => credentialView(row, ctx.deps.lastUsed)), next_cursor: page.nextCursor };
};

export const revokeCredential: Handler<"credentials.revoke"> = async (ctx) => {
  const principal = principalOf(ctx);
  const name = ctx.params.name;
  const result = await revokeAgentCredential(
    ctx.db,
    { tenantId: principal.tenantId, name, revokedBy: principal.principal },
    ctx.clock.now(),
  );
  if (result.kind === "not_found") refuse("not_found", `no live credential named ${name}`);
  await appendAuditEntry(
    ctx.db,
    {
      tenantId: principal.tenantId,
      actor: principal.principal,
      target: `credential:${name}`,
      value: "revoked",
      effective: result.revokedAt,
    },
    ctx.clock.now(),
  );
  return { name, revoked_at: result.revokedAt, revoked_by: principal.principal };
};
