import type { FastifyReply, FastifyRequest } from "fastify";

export const SESSION_COOKIE = "kiln_session";
export const OPERATOR_SESSION_COOKIE = "kiln_operator_session";

/** Person sessions last a working day; operator sessions an hour. */
export const SESSION_SECONDS = 12 * 3600;
export const OPERATOR_SESSION_SECONDS = 3600;

function secure(request: FastifyRequest): boolean {
  return request.protocol === "https";
}

/**
 * HttpOnly (no script reads it), SameSite=Lax (not sent on cross-site subrequests or
 * POSTs), Secure whenever the request arrived over https. Operator cookies are
 * Strict and scoped to the operator surface.
 */
export function setSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  name: typeof SESSION_COOKIE | typeof OPERATOR_SESSION_COOKIE,
  value: string,
  maxAgeSeconds: number,
): void {
  void reply.setCookie(name, value, {
    httpOnly: true,
    sameSite: name === SESSION_COOKIE ? "lax" : "strict",
    secure: secure(request),
    path: name === SESSION_COOKIE ? "/" : "/operator",
    maxAge: maxAgeSeconds,
  });
}

export function clearSessionCookie(
  reply: FastifyReply,
  name: typeof SESSION_COOKIE | typeof OPERATOR_SESSION_COOKIE,
): void {
  void reply.clearCookie(name, { path: name === SESSION_COOKIE ? "/" : "/operator" });
}

export function cookieOf(request: FastifyRequest, name: string): string | null {
  const value = request.cookies[name];
  return value === undefined || value === "" ? null : value;
}
