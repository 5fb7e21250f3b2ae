import { randomBytes, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Refusal } from "../../domain/refusal.js";
import { ProviderError } from "../../domain/source-hosting/github-app.js";
import { GITHUB_CLAIM_CALLBACK_PATH, GITHUB_CLAIM_SETUP_PATH } from "../../domain/source-hosting/github-claim-paths.js";
import { claimInstallationForPerson } from "../handlers/tenant/onboarding.js";
import type { AppDeps } from "../http/app-deps.js";
import { escapeHtml, page } from "./html.js";
import { sendPage, signedIn } from "./page-response.js";

/** Holds the OAuth state and the installation being claimed between the redirect and the callback. */
export const GITHUB_CLAIM_COOKIE = "kiln_github_claim";
const CLAIM_COOKIE_PATH = "/onboarding/github";
/** Ten minutes to authorize at the provider. */
const CLAIM_COOKIE_SECONDS = 600;

interface PendingClaim {
  readonly state: string;
  readonly installationId: number;
  /** Who started it: the callback must come back to the same signed-in person. */
  readonly principal: string;
}

function readPending(request: FastifyRequest): PendingClaim | null {
  const raw = request.cookies[GITHUB_CLAIM_COOKIE];
  if (raw === undefined || raw === "") return null;
  try {
    const value = JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as Partial<PendingClaim>;
    const { state, installationId, principal } = value;
    if (typeof state !== "string" || typeof principal !== "string" || !Number.isSafeInteger(installationId))
      return null;
    return { state, installationId: installationId as number, principal };
  } catch {
    return null;
  }
}

function sameState(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

const TITLE = "Claim the GitHub App installation";

function refusalPage(reply: FastifyReply, refusal: Refusal) {
  return sendPage(
    reply,
    refusal.status,
    page(
      TITLE,
      `<p>The installation was not claimed (<code>${escapeHtml(refusal.code)}</code>): ${escapeHtml(refusal.message)}</p>`,
    ),
  );
}

/**
 * onboarding.claim's provider-authorized route. The app's setup redirect lands on
 * `/onboarding/github/setup?installation_id=…&setup_action=install`, but that id is the
 * browser's word and can be forged; so kiln sends the signed-in tenant admin through the
 * provider's OAuth web flow (state in a short-lived HttpOnly cookie scoped to these paths) and,
 * at the callback, exchanges the code for a user-to-server token used once for
 * `GET /user/installations` and dropped. Only an installation among the person's own is claimed,
 * by the same code as the API's claim (conflict for another tenant's, upstream_failed when the
 * provider refuses or fails); the page names the refusal's code and reason.
 */
export function registerGitHubClaim(app: FastifyInstance, deps: AppDeps): void {
  const redirectUri = `${deps.publicOrigin}${GITHUB_CLAIM_CALLBACK_PATH}`;

  app.get(GITHUB_CLAIM_SETUP_PATH, async (request, reply) => {
    const gitHubApp = deps.gitHubApp;
    if (gitHubApp === undefined || !gitHubApp.verifiesClaims) {
      return sendPage(
        reply,
        404,
        page(TITLE, "<p>This kiln has no GitHub App OAuth client configured, so it cannot check a claim.</p>"),
      );
    }
    const query = request.query as { installation_id?: unknown };
    const installationId = Number(query.installation_id);
    if (typeof query.installation_id !== "string" || !/^[1-9][0-9]{0,15}$/.test(query.installation_id)) {
      return sendPage(
        reply,
        400,
        page(
          TITLE,
          `<p>No installation to claim: install the app first, <a href="${escapeHtml(gitHubApp.installUrl)}">on the provider</a>; it sends you back here.</p>`,
        ),
      );
    }
    const person = await signedIn(deps, request);
    if (person === null) {
      const back = `${GITHUB_CLAIM_SETUP_PATH}?installation_id=${installationId}`;
      if (deps.oidc !== undefined) return reply.redirect(`/auth/oidc/start?next=${encodeURIComponent(back)}`, 303);
      return sendPage(
        reply,
        401,
        page(TITLE, "<p>Sign in to kiln first (a sign-in link from an administrator), then open this page again.</p>"),
      );
    }
    if (!person.scopes.includes("admin")) {
      return refusalPage(reply, new Refusal("role_required", "claiming an installation needs the admin role"));
    }
    const pending: PendingClaim = {
      state: randomBytes(24).toString("base64url"),
      installationId,
      principal: person.principal,
    };
    void reply.setCookie(GITHUB_CLAIM_COOKIE, Buffer.from(JSON.stringify(pending)).toString("base64url"), {
      httpOnly: true,
      // Lax: the provider's redirect back is a top-level navigation, which carries it.
      sameSite: "lax",
      secure: request.protocol === "https",
      path: CLAIM_COOKIE_PATH,
      maxAge: CLAIM_COOKIE_SECONDS,
    });
    return reply.redirect(gitHubApp.authorizationUrl(pending.state, redirectUri), 303);
  });

  app.get(GITHUB_CLAIM_CALLBACK_PATH, async (request, reply) => {
    const gitHubApp = deps.gitHubApp;
    if (gitHubApp === undefined || !gitHubApp.verifiesClaims) {
      return sendPage(reply, 404, page(TITLE, "<p>This kiln has no GitHub App OAuth client configured.</p>"));
    }
    const pending = readPending(request);
    void reply.clearCookie(GITHUB_CLAIM_COOKIE, { path: CLAIM_COOKIE_PATH });
    const query = request.query as { code?: unknown; state?: unknown; error?: unknown };
    if (pending === null || typeof query.state !== "string" || !sameState(query.state, pending.state)) {
      return sendPage(
        reply,
        400,
        page(TITLE, "<p>This claim was not started here or took too long. Open the app's setup link again.</p>"),
      );
    }
    const person = await signedIn(deps, request);
    if (person === null || person.principal !== pending.principal) {
      return sendPage(reply, 401, page(TITLE, "<p>Sign in to kiln as the person who started this claim.</p>"));
    }
    if (!person.scopes.includes("admin")) {
      return refusalPage(reply, new Refusal("role_required", "claiming an installation needs the admin role"));
    }
    const installationId = pending.installationId;
    if (typeof query.code !== "string" || query.code === "") {
      return refusalPage(
        reply,
        new Refusal(
          "upstream_failed",
          `the provider did not authorize the claim (${String(query.error ?? "no code")})`,
        ),
      );
    }
    let reachable: number[];
    try {
      reachable = await gitHubApp.installationsOfPerson(query.code, redirectUri);
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error;
      request.log.warn({ status: error.status }, "the provider refused or failed a claim's authorization");
      return refusalPage(
        reply,
        new Refusal("upstream_failed", `the provider refused or failed to list your installations: ${error.message}`),
      );
    }
    if (!reachable.includes(installationId)) {
      return refusalPage(
        reply,
        new Refusal(
          "upstream_failed",
          `installation ${installationId} is not among the installations the provider lists for your account; only an installation you can reach on the provider can be claimed`,
        ),
      );
    }
    try {
      const receipt = await deps.storage.transaction((trx) =>
        claimInstallationForPerson(gitHubApp, trx, person, installationId, deps.clock.now()),
      );
      return sendPage(
        reply,
        200,
        page(
          TITLE,
          `<p>Installation ${receipt.installation_id} is claimed for tenant <code>${escapeHtml(receipt.tenant)}</code>; its repositories are onboarded.</p><p><a href="/">Open the dashboard</a></p>`,
        ),
      );
    } catch (error) {
      if (error instanceof Refusal) return refusalPage(reply, error);
      throw error;
    }
  });
}
