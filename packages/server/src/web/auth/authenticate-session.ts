import { ROLE_SCOPES } from "@kiln/contract";
import { findLiveSession, findMembership, type Storage } from "@kiln/storage";
import type { Principal } from "../../domain/identity/principal.js";
import { refuse } from "../../domain/refusal.js";
import { hashSecret } from "./session-secret.js";

/**
 * A `kiln_session` cookie → the signed-in person in the session's tenant, with the
 * role they hold there now (a changed role applies to live sessions at once).
 */
export async function authenticateSession(storage: Storage, cookie: string, now: Date): Promise<Principal> {
  const session = await findLiveSession(storage, { tokenHash: hashSecret(cookie), kind: "person", now });
  if (session === undefined || session.tenant_id === null || session.person_id === null) {
    return refuse("unauthenticated", "the session has ended or did not verify; sign in again");
  }
  const member = await findMembership(storage, { tenantId: session.tenant_id, personId: session.person_id });
  if (member === undefined)
    return refuse("unauthenticated", "the session's person is no longer a member of its tenant");
  return {
    kind: "person",
    principal: session.person_id,
    tenantId: session.tenant_id,
    userId: session.person_id,
    displayName: member.displayName,
    role: member.role,
    scopes: ROLE_SCOPES[member.role],
    via: { kind: "session", sessionId: session.id },
    requestsPerMinute: null,
  };
}
