import { type BodyOf, type ResponseDocumentOf, SCOPES } from "@kiln/contract";
import type { FastifyInstance } from "fastify";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { SHOWN_ONCE_NOTICE } from "../http/perform-keyed.js";
import { formatTime } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { dashboardPages, formFields, formKey, registerFormRoutes } from "./open-page.js";
import { keyField, noticeOf, postButton } from "./page-parts.js";
import { type PersonLabel, personLabels } from "./people.js";
import { performAsPerson } from "./perform-as-person.js";
import { performMutationAsPerson } from "./perform-mutation-as-person.js";

/** The copy button of a value shown once, served from kiln's own origin (no inline script). */
export const COPY_SECRET_SCRIPT = `for (const button of document.querySelectorAll("button[data-copy]")) {
  button.addEventListener("click", async () => {
    const field = document.getElementById(button.dataset.copy);
    field.select();
    try {
      await navigator.clipboard.writeText(field.value);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Press Ctrl+C to copy";
    }
  });
}
`;

const EXPIRIES = [
  [86_400, "1 day"],
  [604_800, "7 days"],
  [2_592_000, "30 days"],
  [7_776_000, "90 days"],
  [31_536_000, "365 days"],
] as const;

const NOTICES = {
  revoked: "Revoked. The next request presenting it is refused.",
  replaced: "Registry credential replaced on every host; the value is never shown again.",
};

function renderCredentials(
  page: ResponseDocumentOf<"credentials.list">,
  mayMint: boolean,
  mayRevoke: boolean,
  who: PersonLabel,
): string {
  const rows = page.credentials
    .map(
      (c) =>
        `<tr data-credential="${escapeHtml(c.name)}"><td class="mono">${escapeHtml(c.name)}</td><td>${escapeHtml(c.scopes.join(", "))}</td>
<td>${who(c.created_by)}<div class="muted">${formatTime(c.created_at)}</div></td><td>${formatTime(c.expires_at)}</td><td>${formatTime(c.last_used_at)}</td>
<td class="num">${c.requests_per_minute}/min</td><td>${
          c.revoked_at !== null
            ? `revoked ${formatTime(c.revoked_at)} by ${escapeHtml(c.revoked_by ?? "")}`
            : mayRevoke
              ? postButton(`/credentials/${encodeURIComponent(c.name)}/revoke`, "Revoke", ` class="revoke"`)
              : "live"
        }</td></tr>`,
    )
    .join("\n");
  const table =
    page.credentials.length === 0
      ? `<p class="muted" id="credentials">No agent credentials yet.</p>`
      : `<table id="credentials"><thead><tr><th>Name</th><th>Scopes</th><th>Minted by</th><th>Expires</th><th>Last used</th><th>Limit</th><th></th></tr></thead><tbody>
${rows}</tbody></table>`;
  const mint = mayMint
    ? `<h2>Mint a credential</h2><form method="post" action="/credentials" id="mint-form" class="settings">${keyField()}
<label>Name <input name="name" required pattern="[a-z0-9][a-z0-9-]{0,62}" placeholder="ci-bot"></label>
<fieldset><legend>Scopes</legend>${SCOPES.map((s) => `<label><input type="checkbox" name="scopes" value="${s}"${s === "read" ? " checked" : ""}> ${s}</label>`).join(" ")}</fieldset>
<label>Expires in <select name="expires_in_seconds">${EXPIRIES.map(([seconds, label]) => `<option value="${seconds}"${seconds === 2_592_000 ? " selected" : ""}>${label}</option>`).join("")}</select></label>
<label>Requests per minute <input type="number" name="requests_per_minute" placeholder="600" min="1"></label>
<button type="submit" id="mint">Mint</button></form>
<h2>Private registry credential</h2><form method="post" action="/registry-credentials" id="registry-form" class="settings">${keyField()}
<label>Registry host <input name="registry" required placeholder="crates.example.com"></label>
<label>Authorization <input type="password" name="authorization" required autocomplete="off" placeholder="Bearer …"></label>
<label>Type the registry host again to confirm the replacement <input name="confirm" required autocomplete="off"></label>
<button type="submit">Replace</button></form>`
    : "";
  return `${table}${mint}`;
}

function renderTokens(page: ResponseDocumentOf<"cli_tokens.list">): string {
  if (page.tokens.length === 0)
    return `<p class="muted" id="tokens">No CLI tokens. <code>kiln login</code> issues one.</p>`;
  const rows = page.tokens
    .map(
      (t) =>
        `<tr data-token="${escapeHtml(t.id)}"><td class="mono">${escapeHtml(t.id)}</td><td>${escapeHtml(t.requesting_host)}</td><td>${formatTime(t.created_at)}</td><td>${formatTime(t.last_used_at)}</td><td>${
          t.revoked_at === null
            ? postButton(`/cli-tokens/${encodeURIComponent(t.id)}/revoke`, "Revoke", ` class="revoke"`)
            : `revoked ${formatTime(t.revoked_at)}`
        }</td></tr>`,
    )
    .join("\n");
  return `<table id="tokens"><thead><tr><th>Token</th><th>Requested from</th><th>Issued</th><th>Last used</th><th></th></tr></thead><tbody>
${rows}</tbody></table>`;
}

/**
 * Agent credentials (credentials.list, .create with the value shown once, .revoke), the private
 * registry credential (tenant.registry_credential.replace) and the person's own CLI tokens
 * (cli_tokens.list, .revoke), performed in-process as the person; each button shows only to a
 * role that may use it, and the operation refuses anyone else all the same.
 */
export function registerCredentialPages(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const pages = dashboardPages(deps, handlers);
  const back = { href: "/credentials", label: "Back to credentials" };

  app.get("/assets/copy-secret.js", async (_request, reply) =>
    reply
      .type("text/javascript; charset=utf-8")
      .header("cache-control", "no-cache")
      .header("x-content-type-options", "nosniff")
      .send(COPY_SECRET_SCRIPT),
  );

  app.get("/credentials", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    try {
      const page = await performAsPerson(ctx, "credentials.list", { query: {} });
      const scopes = ctx.person.scopes;
      return pages.send(ctx, 200, {
        title: "Agent credentials",
        body: `${noticeOf((request.query as { notice?: unknown }).notice, NOTICES)}${renderCredentials(
          page,
          scopes.includes("admin"),
          scopes.includes("credentials"),
          await personLabels(
            ctx,
            page.credentials.map((c) => c.created_by),
          ),
        )}`,
      });
    } catch (error) {
      return pages.refused(ctx, "Agent credentials", error);
    }
  });

  app.get("/cli-tokens", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    try {
      const page = await performAsPerson(ctx, "cli_tokens.list", { query: {} });
      return pages.send(ctx, 200, {
        title: "Your CLI tokens",
        body: `${noticeOf((request.query as { notice?: unknown }).notice, NOTICES)}${renderTokens(page)}`,
      });
    } catch (error) {
      return pages.refused(ctx, "Your CLI tokens", error);
    }
  });

  registerFormRoutes(app, (scope) => {
    scope.post("/credentials", async (request, reply) => {
      const ctx = await pages.open(request, reply, "/credentials");
      if (ctx === null) return reply;
      const fields = formFields(request);
      const number = (raw: string | null) => (raw !== null && /^\d+$/.test(raw.trim()) ? Number(raw) : raw);
      const limit = (fields.get("requests_per_minute") ?? "").trim();
      try {
        const issued = await performMutationAsPerson(ctx, "credentials.create", {
          params: {},
          body: {
            name: fields.get("name") ?? "",
            scopes: fields.getAll("scopes"),
            expires_in_seconds: number(fields.get("expires_in_seconds")),
            ...(limit === "" ? {} : { requests_per_minute: number(limit) }),
          } as unknown as BodyOf<"credentials.create">, // validated against the schema in-process
          idempotencyKey: formKey(request),
        });
        const shown =
          issued.credential === SHOWN_ONCE_NOTICE
            ? `<p class="notice" id="already-shown">This form was already submitted: the value was shown then and is never shown again. Revoke the credential and mint a new one if it was lost.</p>`
            : `<p class="notice">Copy the value now: it is shown once and never again.</p>
<p><input id="credential-value" class="secret mono" readonly value="${escapeHtml(issued.credential)}" size="60"> <button type="button" data-copy="credential-value" id="copy">Copy</button></p>`;
        return pages.send(ctx, 201, {
          title: `Credential ${issued.view.name}`,
          body: `${shown}<dl class="facts"><dt>Name</dt><dd class="mono">${escapeHtml(issued.view.name)}</dd><dt>Acts as</dt><dd class="mono">${escapeHtml(issued.view.principal)}</dd>
<dt>Scopes</dt><dd>${escapeHtml(issued.view.scopes.join(", "))}</dd><dt>Expires</dt><dd>${formatTime(issued.view.expires_at)}</dd></dl><p><a href="/credentials">All credentials</a></p>`,
          scripts: ["/assets/copy-secret.js"],
        });
      } catch (error) {
        return pages.refused(ctx, "Mint a credential", error, back);
      }
    });

    scope.post("/credentials/:name/revoke", async (request, reply) => {
      const ctx = await pages.open(request, reply, "/credentials");
      if (ctx === null) return reply;
      try {
        await performMutationAsPerson(ctx, "credentials.revoke", {
          params: { name: (request.params as { name: string }).name },
          idempotencyKey: formKey(request),
        });
        return reply.redirect("/credentials?notice=revoked", 303);
      } catch (error) {
        return pages.refused(ctx, "Revoke a credential", error, back);
      }
    });

    scope.post("/registry-credentials", async (request, reply) => {
      const ctx = await pages.open(request, reply, "/credentials");
      if (ctx === null) return reply;
      const fields = formFields(request);
      try {
        await performMutationAsPerson(ctx, "tenant.registry_credential.replace", {
          params: {},
          body: {
            registry: fields.get("registry") ?? "",
            authorization: fields.get("authorization") ?? "",
            confirm: fields.get("confirm") ?? "",
          },
          idempotencyKey: formKey(request),
        });
        return reply.redirect("/credentials?notice=replaced", 303);
      } catch (error) {
        return pages.refused(ctx, "Replace a registry credential", error, back);
      }
    });

    scope.post("/cli-tokens/:id/revoke", async (request, reply) => {
      const ctx = await pages.open(request, reply, "/cli-tokens");
      if (ctx === null) return reply;
      try {
        await performMutationAsPerson(ctx, "cli_tokens.revoke", {
          params: { id: (request.params as { id: string }).id },
          idempotencyKey: formKey(request),
        });
        return reply.redirect("/cli-tokens?notice=revoked", 303);
      } catch (error) {
        return pages.refused(ctx, "Revoke a CLI token", error, { href: "/cli-tokens", label: "Back to your tokens" });
      }
    });
  });
}
