import type { Operation } from "@kiln/contract";
import type { FastifyRequest } from "fastify";
import { authenticateBearer } from "../auth/authenticate-bearer.js";
import type { Principal } from "../auth/principal.js";
import type { AppDeps } from "../deps.js";
import { refuse } from "./refusal.js";

function bearerOf(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (header === undefined) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (match?.[1] === undefined) refuse("unauthenticated", "the authorization header is not `Bearer <credential>`");
  return match[1];
}

/**
 * Establishes the caller and checks the operation's catalogued security. This is
 * the only authorization code path: handlers never check scopes themselves.
 */
export async function enforceSecurity(
  deps: AppDeps,
  op: Operation,
  request: FastifyRequest,
): Promise<Principal | null> {
  const security = op.security;
  switch (security.kind) {
    case "public":
      return null;
    case "operator":
    case "operator-bootstrap":
      // Operator sessions arrive with the identity issue; until then no caller holds one.
      return refuse("operator_not_found", "the operator surface answers only an operator session");
    case "session":
      // Dashboard sessions arrive with the identity issue; a bearer credential never reaches these.
      if (bearerOf(request) !== null)
        refuse("session_required", `${op.id} is performed only inside a signed-in session`);
      return refuse("unauthenticated", `${op.id} needs a signed-in session`);
    case "tenant": {
      const token = bearerOf(request);
      if (token === null) refuse("unauthenticated", `${op.id} needs a bearer credential`);
      const principal = await authenticateBearer(deps.storage, token, deps.clock.now());
      if (!principal.scopes.includes(security.scope)) {
        refuse("out_of_scope", `${op.id} needs the ${security.scope} scope`, { scope: security.scope });
      }
      if (security.human === true && principal.kind !== "person") {
        refuse("human_principal_required", `${op.id} is a human act; an agent credential cannot perform it`);
      }
      return principal;
    }
  }
}
