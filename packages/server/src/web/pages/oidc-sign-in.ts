import { addPersonToTenant, findTenant } from "@kiln/storage";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { establishSession } from "../auth/establish-session.js";
import { emailVouchedFor, finishAuthorization, type OidcPending, startAuthorization } from "../auth/oidc-client.js";
import { type GrantedMembership, membershipsFromGroups } from "../auth/oidc-memberships.js";
import type { AppDeps } from "../http/app-deps.js";
import { escapeHtml, page } from "./html.js";
import { sendPage } from "./page-response.js";
import { ownPath } from "./register-pages.js";

/** Holds state, nonce, PKCE verifier and the destination between the redirect and the callback. */
export const OIDC_COOKIE = "kiln_oidc";
const OIDC_COOKIE_PATH = "/auth/oidc";
/** Ten minutes to sign in at the identity provider. */
const OIDC_COOKIE_SECONDS = 600;

export const OIDC_CALLBACK_PATH = "/auth/oidc/callback";

function readPending(request: FastifyRequest): OidcPending | null {
  const raw = request.cookies[OIDC_COOKIE];
  if (raw === undefined || raw === "") return null;
  try {
    const value = JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as Partial<OidcPending>;
    const { state, nonce, verifier, next } = value;
    if (typeof state !== "string" || typeof nonce !== "string" || typeof verifier !== "string") return null;
    return { state, nonce, verifier, next: typeof next === "string" ? next : "/" };
  } catch {
    return null;
  }
}

const TRY_AGAIN = `<p><a href="/auth/oidc/start">Sign in again</a></p>`;

/**
 * OpenID Connect sign-in (authorization code flow with PKCE) against the configured identity
 * provider: `/auth/oidc/start` redirects there; `/auth/oidc/callback` redeems the code, maps the
 * groups claim to tenant memberships (web/auth/oidc-memberships.ts) and ends in establishSession,
 * as every sign-in method does. Sign-out is the common `POST /auth/sign-out`.
 */
export function registerOidcSignIn(app: FastifyInstance, deps: AppDeps): void {
  const redirectUri = `${deps.publicOrigin}${OIDC_CALLBACK_PATH}`;

  app.get("/auth/oidc/start", async (request, reply) => {
    const settings = deps.oidc;
    if (settings === undefined) {
      return sendPage(reply, 404, page("Single sign-on", "<p>No identity provider is configured for this kiln.</p>"));
    }
    const next = ownPath((request.query as { next?: unknown }).next, deps.publicOrigin);
    let started: Awaited<ReturnType<typeof startAuthorization>>;
    try {
      started = await startAuthorization(settings, redirectUri, next);
    } catch (error) {
      request.log.warn({ err: error }, "OpenID Connect discovery failed");
      return sendPage(
        reply,
        503,
        page("Single sign-on", "<p>The identity provider cannot be reached right now. Try again shortly.</p>"),
      );
    }
    void reply.setCookie(OIDC_COOKIE, Buffer.from(JSON.stringify(started.pending)).toString("base64url"), {
      httpOnly: true,
      // Lax: the identity provider's redirect back is a top-level navigation, which carries it.
      sameSite: "lax",
      secure: request.protocol === "https",
      path: OIDC_COOKIE_PATH,
      maxAge: OIDC_COOKIE_SECONDS,
    });
    return reply.redirect(started.url.href, 303);
  });

  app.get(OIDC_CALLBACK_PATH, async (request, reply) => {
    const settings = deps.oidc;
    if (settings === undefined) {
      return sendPage(reply, 404, page("Single sign-on", "<p>No identity provider is configured for this kiln.</p>"));
    }
    const pending = readPending(request);
    void reply.clearCookie(OIDC_COOKIE, { path: OIDC_COOKIE_PATH });
    if (pending === null) {
      return sendPage(
        reply,
        400,
        page("Sign-in expired", `<p>This sign-in was not started here or took too long.</p>${TRY_AGAIN}`),
      );
    }
    let claims: Record<string, unknown>;
    try {
      claims = await finishAuthorization(settings, new URL(request.url, deps.publicOrigin), pending);
    } catch (error) {
      request.log.warn({ err: error }, "OpenID Connect callback refused");
      const why = error instanceof Error ? error.message : String(error);
      return sendPage(
        reply,
        400,
        page("Sign-in failed", `<p>The identity provider's answer was refused: ${escapeHtml(why)}</p>${TRY_AGAIN}`),
      );
    }
    const email = claims.email;
    if (typeof email !== "string" || email === "" || !emailVouchedFor(claims.email_verified, settings)) {
      // The operator's hint: a provider that verifies every address but omits the claim needs the setting.
      request.log.warn(
        { emailVerified: claims.email_verified ?? "absent" },
        "OpenID Connect sign-in refused: no verified email (KILN_OIDC_PROVIDER_VERIFIES_EMAILS=on trusts an absent email_verified)",
      );
      return sendPage(
        reply,
        403,
        page(
          "Sign-in refused",
          "<p>The identity provider did not vouch for an email address for this account. Verify the address at your identity provider, then sign in again.</p>",
        ),
      );
    }
    const granted: GrantedMembership[] = [];
    for (const membership of membershipsFromGroups(claims[settings.groupsClaim])) {
      if ((await findTenant(deps.storage, membership.tenantId)) !== undefined) granted.push(membership);
    }
    const first = granted[0];
    if (first === undefined) {
      return sendPage(
        reply,
        403,
        page(
          "No kiln tenant",
          `<p>Your account (${escapeHtml(email)}) is in no group that grants a kiln tenant. An administrator of your identity provider adds you to a group named <code>kiln:&lt;tenant&gt;:&lt;role&gt;</code>.</p>`,
        ),
      );
    }
    const name = typeof claims.name === "string" && claims.name !== "" ? claims.name : undefined;
    let personId = "";
    for (const membership of granted) {
      const added = await addPersonToTenant(
        deps.storage,
        {
          tenantId: membership.tenantId,
          email,
          role: membership.role,
          ...(name === undefined ? {} : { displayName: name }),
          organizationId: membership.group,
        },
        deps.clock.now(),
      );
      personId = added.person.id;
    }
    await establishSession(deps, request, reply, { tenantId: first.tenantId, personId });
    return reply.redirect(pending.next, 303);
  });
}
