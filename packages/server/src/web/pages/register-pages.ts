import { endSession, findDeviceAuthorization, findTenant, redeemSignInLink } from "@kiln/storage";
import type { FastifyInstance } from "fastify";
import { establishSession } from "../auth/establish-session.js";
import { clearSessionCookie, cookieOf, SESSION_COOKIE } from "../auth/session-cookies.js";
import { hashSecret } from "../auth/session-secret.js";
import { normalizeUserCode } from "../handlers/tenant/device.js";
import type { AppDeps } from "../http/app-deps.js";
import { refuseCrossSite } from "../http/enforce-security.js";
import { dashboardPage } from "./dashboard-layout.js";
import { escapeHtml, page } from "./html.js";
import { faviconPath, faviconSvg, LAYOUT_SCRIPT, LAYOUT_SCRIPT_PATH } from "./layout-script.js";
import { sendPage as send, signedIn } from "./page-response.js";

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
  app.get(LAYOUT_SCRIPT_PATH, async (_request, reply) =>
    reply
      .type("text/javascript; charset=utf-8")
      .header("cache-control", "no-cache")
      .header("x-content-type-options", "nosniff")
      .send(LAYOUT_SCRIPT),
  );
  app.get("/assets/favicon/:name", async (request, reply) =>
    reply
      .type("image/svg+xml")
      .header("cache-control", "max-age=86400")
      .header("x-content-type-options", "nosniff")
      .send(faviconSvg((request.params as { name: string }).name.replace(/\.svg$/, ""))),
  );
  // Where a browser looks for an icon on a page without one (a JSON document): kiln's own.
  app.get("/favicon.ico", async (_request, reply) => reply.redirect(faviconPath(undefined), 301));

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
      typeof token === "string" ? await redeemSignInLink(deps.storage, hashSecret(token), deps.clock.now()) : undefined;
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

  // The sign-out button is an HTML form: it posts an empty urlencoded body, which this route
  // alone accepts (the API parses JSON and bytes only).
  void app.register(async (scope) => {
    scope.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_request, _body, done) =>
      done(null, undefined),
    );
    scope.post("/auth/sign-out", async (request, reply) => {
      // Another site must not sign a person out (a login-CSRF's first half).
      refuseCrossSite(request, deps.publicOrigin);
      const cookie = cookieOf(request, SESSION_COOKIE);
      if (cookie !== null) await endSession(deps.storage, hashSecret(cookie), deps.clock.now());
      clearSessionCookie(reply, SESSION_COOKIE);
      return reply.redirect("/", 303);
    });
  });

  app.get("/", async (request, reply) => {
    const person = await signedIn(deps, request);
    if (person === null) {
      const next = ownPath((request.query as { next?: unknown }).next, deps.publicOrigin);
      const sso =
        deps.oidc === undefined
          ? ""
          : `<p><a id="sign-in-oidc" href="/auth/oidc/start?next=${encodeURIComponent(next)}">Sign in with your organization's identity provider</a></p>`;
      const kept = next.startsWith("/resume?")
        ? `<p class="notice" id="session-ended">Your session has ended — sign in again. What you were doing is kept: you confirm it once you are signed in.</p>`
        : "";
      return send(
        reply,
        200,
        page(
          "kiln",
          `${kept}<p>You are not signed in.</p>${sso}<p>An administrator can also send you a one-time sign-in link: <code>kiln-server admin sign-in-link you@example.com</code>.</p>`,
        ),
      );
    }
    const tenant = await findTenant(deps.storage, person.tenantId);
    const tenantName = tenant?.displayName ?? person.tenantId;
    return send(
      reply,
      200,
      dashboardPage({
        title: "kiln",
        person,
        tenantName,
        path: "/",
        body: `<p id="landing">Signed in as <strong>${escapeHtml(person.displayName)}</strong>, ${escapeHtml(person.role ?? "")} of ${escapeHtml(tenantName)}.</p>
<ul><li><a href="/jobs">Jobs</a>: what ran, live, with failures first.</li><li><a href="/repositories">Repositories</a>: onboard one, its warm lineages and settings.</li>
<li><a href="/onboarding">Onboarding</a>: from the CLI's <code>kiln login</code> to your first <code>kiln cargo test</code>.</li></ul>`,
      }),
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
