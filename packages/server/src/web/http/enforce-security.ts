import { LEAST_ROLE_FOR_SCOPE, type Operation } from "@kiln/contract";
import { findLiveSession } from "@kiln/storage";
import type { FastifyRequest } from "fastify";
import type { OperatorPrincipal, Principal } from "../../domain/identity/principal.js";
import { refuse } from "../../domain/refusal.js";
import { authenticateBearer } from "../auth/authenticate-bearer.js";
import { authenticateSession } from "../auth/authenticate-session.js";
import { enforceRateLimit } from "../auth/enforce-rate-limit.js";
import { verifyOperatorCredential } from "../auth/operator-credential.js";
import { cookieOf, OPERATOR_SESSION_COOKIE, SESSION_COOKIE } from "../auth/session-cookies.js";
import { hashSecret } from "../auth/session-secret.js";
import type { AppDeps } from "./app-deps.js";

/** Requests per minute a client address may make to the public device endpoints. */
export const PUBLIC_LIMITS: Readonly<Record<string, number>> = { "device.start": 10, "device.poll": 120 };

export interface Caller {
  readonly principal: Principal | null;
  readonly operator: OperatorPrincipal | null;
}

const NOBODY: Caller = { principal: null, operator: null };

function bearerOf(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (header === undefined) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (match?.[1] === undefined) refuse("unauthenticated", "the authorization header is not `Bearer <credential>`");
  return match[1];
}

/**
 * A cookie-authenticated mutation must come from kiln's own pages: browsers name the page's
 * origin (`Origin`) on every POST a page makes, and fetch metadata (`Sec-Fetch-Site`) on every
 * request, so a mutation that carries neither was not made by a page of kiln's and is refused,
 * as is one naming another origin or site (SameSite already keeps the cookie off cross-site
 * POSTs; this is the second lock, and the one that holds where SameSite does not). The operator
 * surface refuses it as it refuses every caller without an operator session.
 */
export function refuseCrossSite(
  request: FastifyRequest,
  publicOrigin: string,
  code: "unauthenticated" | "operator_not_found" = "unauthenticated",
): void {
  if (request.method === "GET" || request.method === "HEAD") return;
  const origin = request.headers.origin;
  const site = request.headers["sec-fetch-site"];
  const own = new Set([publicOrigin, `${request.protocol}://${request.host}`]);
  if ((origin !== undefined && !own.has(origin)) || site === "cross-site" || site === "same-site") {
    refuse(code, "a session mutation must come from kiln's own pages (cross-site request refused)");
  }
  if (origin === undefined && site !== "same-origin") {
    refuse(
      code,
      "a session mutation must come from kiln's own pages: it names neither its Origin nor Sec-Fetch-Site: same-origin",
    );
  }
}

async function personSession(deps: AppDeps, request: FastifyRequest, op: Operation): Promise<Principal> {
  const cookie = cookieOf(request, SESSION_COOKIE);
  if (cookie === null) return refuse("unauthenticated", `${op.id} needs a signed-in session`);
  refuseCrossSite(request, deps.publicOrigin);
  return authenticateSession(deps.storage, cookie, deps.clock.now());
}

/**
 * Establishes the caller and checks the operation's catalogued security. This is the
 * only authorization code path: handlers never check scopes, roles or sessions.
 */
export async function enforceSecurity(deps: AppDeps, op: Operation, request: FastifyRequest): Promise<Caller> {
  const security = op.security;
  const now = deps.clock.now();
  switch (security.kind) {
    case "public": {
      const limit = PUBLIC_LIMITS[op.id];
      if (limit !== undefined) {
        await enforceRateLimit(deps.storage, { bucket: `${op.id}:${request.ip}`, limit, now, what: op.id });
      }
      return NOBODY;
    }
    case "operator-bootstrap": {
      const token = bearerOf(request);
      if (token === null || !(await verifyOperatorCredential(deps.storage, token))) {
        return refuse("operator_not_found", "the operator surface answers only an operator session");
      }
      return NOBODY;
    }
    case "operator": {
      const cookie = cookieOf(request, OPERATOR_SESSION_COOKIE);
      const session =
        cookie === null
          ? undefined
          : await findLiveSession(deps.storage, { tokenHash: hashSecret(cookie), kind: "operator", now });
      if (session === undefined)
        return refuse("operator_not_found", "the operator surface answers only an operator session");
      refuseCrossSite(request, deps.publicOrigin, "operator_not_found");
      return {
        principal: null,
        operator: { kind: "operator", principal: `operator:${session.id}`, sessionId: session.id },
      };
    }
    case "session": {
      if (cookieOf(request, SESSION_COOKIE) === null && bearerOf(request) !== null) {
        refuse("session_required", `${op.id} is performed only inside a signed-in session`);
      }
      return { principal: await personSession(deps, request, op), operator: null };
    }
    case "tenant": {
      const token = bearerOf(request);
      let principal: Principal;
      if (token === null && security.cookie === true && cookieOf(request, SESSION_COOKIE) !== null) {
        principal = await personSession(deps, request, op);
      } else if (token === null) {
        return refuse("unauthenticated", `${op.id} needs a bearer credential`);
      } else {
        principal = await authenticateBearer(deps.storage, token, now);
      }
      if (!principal.scopes.includes(security.scope)) {
        if (principal.via.kind === "session") {
          const role = LEAST_ROLE_FOR_SCOPE[security.scope];
          refuse("role_required", `${op.id} needs the ${role} role`, { role });
        }
        refuse("out_of_scope", `${op.id} needs the ${security.scope} scope`, { scope: security.scope });
      }
      if (security.human === true && !(principal.kind === "person" && principal.via.kind === "cli_token")) {
        refuse("human_principal_required", `${op.id} is a human act performed with a person's CLI device token`);
      }
      if (principal.requestsPerMinute !== null && principal.via.kind === "agent_credential") {
        await enforceRateLimit(deps.storage, {
          bucket: `agent:${principal.tenantId}:${principal.via.tokenHash}`,
          limit: principal.requestsPerMinute,
          now,
          what: `credential ${principal.via.name}`,
        });
      }
      deps.lastUsed?.note(principal, now);
      return { principal, operator: null };
    }
  }
}
