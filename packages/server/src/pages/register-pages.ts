import { endSession, findDeviceAuthorization, findTenant, redeemSignInLink } from "@kiln/storage";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { authenticateSession } from "../auth/authenticate-session.js";
import { establishSession } from "../auth/establish-session.js";
import type { Principal } from "../auth/principal.js";
import { clearSessionCookie, cookieOf, SESSION_COOKIE } from "../auth/session-cookies.js";
import { hashSecret } from "../auth/session-secret.js";
import type { AppDeps } from "../deps.js";
import { normalizeUserCode } from "../handlers/device.js";
import { refuseCrossSite } from "../http/enforce-security.js";
import { Refusal } from "../http/refusal.js";
import { escapeHtml, page } from "./html.js";

const HTML = "text/html; charset=utf-8";

async function signedIn(deps: AppDeps, request: FastifyRequest): Promise<Principal | null> {
  const cookie = cookieOf(request, SESSION_COOKIE);
  if (cookie === null) return null;
  try {
    return await authenticateSession(deps.storage, cookie, deps.clock.now());
  } catch (error) {
    if (error instanceof Refusal) return null;
    throw error;
  }
}

/**
 * Pages run no inline script and cannot be framed (a framed approval page is a clickjacking
 * target): scripts only from kiln's own /assets, nothing embeds them.
 */
const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

function send(reply: FastifyReply, status: number, html: string) {
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

/** The approval button's script, served from kiln's own origin (the page policy allows no inline script). */
const DEVICE_APPROVE_SCRIPT = `const button = document.getElementById("approve");
button.addEventListener("click", async () => {
  const code = document.getElementById("user-code").textContent;
  const res = await fetch("/api/device/approve?user_code=" + encodeURIComponent(code), {
    method: "POST", credentials: "same-origin", headers: { "idempotency-key": crypto.randomUUID() } });
  const body = await res.json();
  document.getElementById("result").textContent = res.ok ? "Approved. You can return to your terminal." : body.detail;
  if (res.ok) button.disabled = true;
});
`;

/**
 * Where a sign-in link may send the person afterwards: a path of kiln's own. Browsers read a
 * backslash as a slash, so `/\evil.example` would leave the site just as `//evil.example`.
 */
export function ownPath(next: unknown, publicOrigin: string): string {
  if (typeof next !== "string" || !next.startsWith("/") || next.includes("\\")) return "/";
  try {
    const url = new URL(next, publicOrigin);
    return url.origin === new URL(publicOrigin).origin ? `${url.pathname}${url.search}${url.hash}` : "/";
  } catch {
    return "/";
  }
}

/**
 * The pages a person opens in a browser before the dashboard exists: sign-in links,
 * sign-out, the landing page and the device verification page (RFC 8628 §3.3).
 */
export function registerPages(app: FastifyInstance, deps: AppDeps): void {
  app.get("/assets/device-approve.js", async (_request, reply) =>
    reply
      .type("text/javascript; charset=utf-8")
      .header("cache-control", "no-cache")
      .header("x-content-type-options", "nosniff")
      .send(DEVICE_APPROVE_SCRIPT),
  );

  app.get("/auth/sign-in", async (request, reply) => {
    const token = (request.query as { token?: unknown }).token;
    const who =
      typeof token === "string" ? await redeemSignInLink(deps.storage, hashSecret(token), deps.clock) : undefined;
    if (who === undefined) {
      return send(
        reply,
        400,
        page(
          "Sign-in link not valid",
          "<p>This sign-in link is unknown, expired or already used. Ask an administrator for a new one.</p>",
        ),
      );
    }
    await establishSession(deps, request, reply, who);
    // Only kiln's own paths: an open redirect would turn sign-in links into phishing links.
    return reply.redirect(ownPath((request.query as { next?: unknown }).next, deps.publicOrigin), 303);
  });

  app.post("/auth/sign-out", async (request, reply) => {
    // Another site must not sign a person out (a login-CSRF's first half).
    refuseCrossSite(request, deps.publicOrigin);
    const cookie = cookieOf(request, SESSION_COOKIE);
    if (cookie !== null) await endSession(deps.storage, hashSecret(cookie), deps.clock);
    clearSessionCookie(reply, SESSION_COOKIE);
    return reply.redirect("/", 303);
  });

  app.get("/", async (request, reply) => {
    const person = await signedIn(deps, request);
    if (person === null) {
      return send(
        reply,
        200,
        page(
          "kiln",
          "<p>You are not signed in. An administrator can send you a sign-in link: <code>kiln-server admin sign-in-link you@example.com</code>.</p>",
        ),
      );
    }
    const tenant = await findTenant(deps.storage, person.tenantId);
    return send(
      reply,
      200,
      page(
        "kiln",
        `<p>Signed in as <strong>${escapeHtml(person.displayName)}</strong>, ${escapeHtml(person.role ?? "")} of ${escapeHtml(tenant?.displayName ?? person.tenantId)}.</p>
<form method="post" action="/auth/sign-out"><button type="submit">Sign out</button></form>`,
      ),
    );
  });

  app.get("/device", async (request, reply) => {
    const raw = (request.query as { user_code?: unknown }).user_code;
    const userCode = typeof raw === "string" ? normalizeUserCode(raw) : null;
    const person = await signedIn(deps, request);
    if (person === null) {
      return send(
        reply,
        401,
        page(
          "Approve a device",
          "<p>Sign in first (ask an administrator for a sign-in link), then open this page again.</p>",
        ),
      );
    }
    const found = userCode === null ? undefined : await findDeviceAuthorization(deps.storage, { userCode });
    if (found === undefined || found.state !== "pending" || found.expires_at <= deps.clock.now().toISOString()) {
      return send(
        reply,
        404,
        page("Approve a device", "<p>No device is waiting for this code. Run <code>kiln login</code> again.</p>"),
      );
    }
    const shown = `${found.user_code.slice(0, 4)}-${found.user_code.slice(4)}`;
    return send(
      reply,
      200,
      page(
        "Approve a device",
        `<p>A device at <strong id="host">${escapeHtml(found.requesting_host)}</strong> asks to act as you (${escapeHtml(person.displayName)}) in ${escapeHtml(person.tenantId)}.</p>
<p>Check that it shows this code: <span class="code" id="user-code">${escapeHtml(shown)}</span></p>
<p>It expires at ${escapeHtml(found.expires_at)}.</p>
<button id="approve" type="button">Approve</button> <span id="result" role="status"></span>
<script src="/assets/device-approve.js"></script>`,
      ),
    );
  });
}
