import { ROLE_SCOPES, type Role, type Scope } from "@kiln/contract";
import { findAgentCredentialByHash, findCliTokenByHash, type Storage } from "@kiln/storage";
import type { Principal } from "../../domain/identity/principal.js";
import { hashToken, tokenKindOf } from "../../domain/identity/token-format.js";
import { refuse } from "../../domain/refusal.js";

/**
 * Resolves `Authorization: Bearer <token>` to a principal, or refuses:
 * a malformed value or one that matches nothing is `unauthenticated`; a revoked
 * one names revoked_at; an expired agent credential names expired_at.
 */
export async function authenticateBearer(storage: Storage, token: string, now: Date): Promise<Principal> {
  const kind = tokenKindOf(token);
  if (kind === null) refuse("unauthenticated", "the bearer credential is not a well-formed kiln token");
  // Enrollment tokens speak only the host protocol (host-protocol/), once.
  if (kind === "enroll") refuse("unauthenticated", "a host enrollment token authenticates no tenant operation");
  const hash = hashToken(token);
  if (kind === "cli") {
    const row = await findCliTokenByHash(storage, hash);
    if (row === undefined) refuse("unauthenticated", "the bearer credential did not verify");
    if (row.revoked_at !== null) {
      refuse("credential_revoked", `this CLI token was revoked at ${row.revoked_at}`, { revoked_at: row.revoked_at });
    }
    const role = row.role as Role;
    return {
      kind: "person",
      principal: row.person_id,
      tenantId: row.tenant_id,
      userId: row.person_id,
      displayName: row.display_name,
      role,
      scopes: ROLE_SCOPES[role],
      via: { kind: "cli_token", tokenId: row.id },
      requestsPerMinute: null,
    };
  }
  const row = await findAgentCredentialByHash(storage, hash);
  if (row === undefined) refuse("unauthenticated", "the bearer credential did not verify");
  if (row.revoked_at !== null) {
    refuse("credential_revoked", `credential ${row.name} was revoked at ${row.revoked_at}`, {
      revoked_at: row.revoked_at,
    });
  }
  if (row.expires_at <= now.toISOString()) {
    refuse("credential_expired", `credential ${row.name} expired at ${row.expires_at}`, { expired_at: row.expires_at });
  }
  return {
    kind: "agent",
    principal: `agent:${row.name}`,
    tenantId: row.tenant_id,
    userId: null,
    displayName: row.name,
    role: null,
    scopes: JSON.parse(row.scopes) as Scope[],
    via: { kind: "agent_credential", name: row.name, tokenHash: hash },
    requestsPerMinute: row.requests_per_minute,
  };
}
