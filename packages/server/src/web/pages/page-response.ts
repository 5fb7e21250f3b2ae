import type { FastifyReply, FastifyRequest } from "fastify";
import type { Principal } from "../../domain/identity/principal.js";
import { Refusal } from "../../domain/refusal.js";
import { authenticateSession } from "../auth/authenticate-session.js";
import { cookieOf, SESSION_COOKIE } from "../auth/session-cookies.js";
import type { AppDeps } from "../http/app-deps.js";

const HTML = "text/html; charset=utf-8";

/**
 * Pages run no inline script and cannot be framed (a framed approval page is a clickjacking
 * target): scripts only from kiln's own /assets, nothing embeds them.
 */
export const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** Sends a server-rendered page with kiln's page headers (CSP, no framing, no caching). */
export function sendPage(reply: FastifyReply, status: number, html: string) {
  return reply
    .code(status)
    .type(HTML)
    .header("cache-control", "no-store")
    .header("content-security-policy", PAGE_POLICY)
    .header("x-frame-options", "DENY")
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "same-origin")
    .send(html);
}

/** The person whose `kiln_session` cookie the request carries, or null when there is none or it ended. */
export async function signedIn(deps: AppDeps, request: FastifyRequest): Promise<Principal | null> {
  const cookie = cookieOf(request, SESSION_COOKIE);
  if (cookie === null) return null;
  try {
    return await authenticateSession(deps.storage, cookie, deps.clock.now());
  } catch (error) {
    if (error instanceof Refusal) return null;
    throw error;
  }
}
