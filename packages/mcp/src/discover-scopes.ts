import { type KilnClient, KilnRefusal } from "@kiln/client";
import { CATALOGUE, type Operation, SCOPES, type Scope } from "@kiln/contract";
import { callOperation } from "./call-operation.js";

/** Refusals that mean the credential itself is unusable: no tool would work. */
const CREDENTIAL_REFUSALS = new Set(["unauthenticated", "credential_revoked", "credential_expired"]);

/** The credential cannot be used at all (refused before any scope is considered). */
export class CredentialRefused extends Error {
  constructor(readonly refusal: KilnRefusal["refusal"]) {
    super(`the API refused the credential: ${refusal.code}: ${refusal.detail}`);
    this.name = "CredentialRefused";
  }
}

/**
 * A harmless request the API answers `out_of_scope` exactly when the credential lacks
 * `scope`: a read with placeholder path parameters, or a keyed mutation sent without its
 * idempotency key. The API settles the caller's scope before it parses or performs
 * anything, and refuses a keyed mutation without a key before any effect.
 */
function probeOf(scope: Scope): Operation | undefined {
  const candidates = CATALOGUE.filter(
    (op) =>
      op.mcp !== undefined &&
      op.security.kind === "tenant" &&
      op.security.scope === scope &&
      op.security.human !== true &&
      (op.method === "GET" || op.keyed),
  );
  return candidates.find((op) => op.method === "GET") ?? candidates[0];
}

function placeholders(op: Operation): Record<string, string> {
  return Object.fromEntries([...op.path.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => [m[1], "kiln-probe"]));
}

async function holds(client: KilnClient, scope: Scope): Promise<boolean> {
  const op = probeOf(scope);
  if (op === undefined) return false;
  try {
    await callOperation(client, op.id, {
      params: placeholders(op),
      ...(op.request.body?.encoding === "json" ? { body: {} } : {}),
    });
    return true;
  } catch (error) {
    if (!(error instanceof KilnRefusal)) throw error;
    if (CREDENTIAL_REFUSALS.has(error.code)) throw new CredentialRefused(error.refusal);
    return !(error.code === "out_of_scope" && error.refusal.scope === scope);
  }
}

/**
 * The credential's scopes, as the API reports them: identity.current names them. A
 * credential without the `read` scope cannot read its identity, so each other scope is
 * asked of the API with a harmless request (see probeOf). Either way the API decides;
 * the MCP server only uses the answer to choose which tools to list.
 */
export async function discoverScopes(client: KilnClient): Promise<Scope[]> {
  try {
    const identity = await client.call("identity.current", {});
    return SCOPES.filter((scope) => identity.scopes.includes(scope));
  } catch (error) {
    if (!(error instanceof KilnRefusal)) throw error;
    if (CREDENTIAL_REFUSALS.has(error.code)) throw new CredentialRefused(error.refusal);
    if (error.code !== "out_of_scope") throw error;
  }
  const held: Scope[] = [];
  for (const scope of SCOPES) {
    if (scope !== "read" && (await holds(client, scope))) held.push(scope);
  }
  return held;
}
