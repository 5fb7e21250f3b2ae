import type { Clock } from "@kiln/contract";
import { createSession, type Storage } from "@kiln/storage";
import type { FastifyReply, FastifyRequest } from "fastify";
import { SESSION_COOKIE, SESSION_SECONDS, setSessionCookie } from "./session-cookies.js";
import { hashSecret, mintSecret } from "./session-secret.js";

/**
 * The seam every sign-in method ends in: one-time sign-in links today, hosted OpenID
 * Connect later. A method proves who the person is and which tenant they act in;
 * this opens the server-side session and sets the `kiln_session` cookie.
 */
export async function establishSession(
  deps: { readonly storage: Storage; readonly clock: Clock },
  request: FastifyRequest,
  reply: FastifyReply,
  who: { tenantId: string; personId: string },
): Promise<void> {
  const value = mintSecret();
  const now = deps.clock.now();
  await createSession(
    deps.storage,
    {
      kind: "person",
      tokenHash: hashSecret(value),
      tenantId: who.tenantId,
      personId: who.personId,
      expiresAt: new Date(now.getTime() + SESSION_SECONDS * 1000),
    },
    deps.clock.now(),
  );
  setSessionCookie(request, reply, SESSION_COOKIE, value, SESSION_SECONDS);
}
