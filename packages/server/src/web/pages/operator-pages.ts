import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { OperatorPrincipal } from "../../domain/identity/principal.js";
import { Refusal } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { escapeHtml } from "./html.js";
import { formFields, registerFormRoutes } from "./open-page.js";
import { operatorPage } from "./operator-layout.js";
import {
  hostHref,
  renderAudit,
  renderHostDetail,
  renderHosts,
  renderPlacements,
  renderPlatformStates,
  renderRecovery,
  tenantLink,
} from "./operator-page-parts.js";
import {
  renderAnomalies,
  renderDogfood,
  renderTenantControls,
  renderTenantList,
  tenantControlsForm,
} from "./operator-record-parts.js";
import { noticeOf } from "./page-parts.js";
import { sendPage } from "./page-response.js";
import {
  type OperatorPageContext,
  openOperatorSession,
  performAsOperator,
  signedInOperator,
} from "./perform-as-operator.js";

/** Operator audit entries per page (operator.audit.list answers the newest thousand). */
const AUDIT_PER_PAGE = 50;

/** What a host page says after its drain or undrain form (a fixed key, never text from the URL). */
const HOST_NOTICES = {
  drained: "Drained: placement on this host stopped; running work continues. The drain is in the operator audit.",
  undrained: "Returned to placement. The undrain is in the operator audit.",
} as const;

/** What the tenant page says after its controls form. */
const TENANT_NOTICES = { saved: "Saved. The change is in the operator audit." } as const;

/** A form's number as the operation's body takes it; anything but digits goes to validation as sent. */
function formNumber(raw: string): number {
  return (/^[0-9]{1,15}$/.test(raw) ? Number(raw) : raw) as number;
}

const SECTIONS = [
  ["/operator/hosts", "Hosts", "state, capacity, drain and undrain"],
  ["/operator/placements", "Placements", "live placements, flagged first"],
  ["/operator/anomalies", "Anomalies", "tenant anomaly flags and platform anomalies"],
  ["/operator/audit", "Audit", "every operator action, newest first"],
  ["/operator/dogfood", "Dogfood", "the dogfood period: gate, clock, incidents, scorecard"],
  ["/operator/tenants", "Tenants", "a tenant's limits and suspension"],
] as const;

function signInForm(notice: string): string {
  return `${notice}<form method="post" action="/operator/sign-in" id="operator-sign-in">
<p><label>Operator credential <input type="password" name="credential" autocomplete="off" required size="60"></label></p>
<p><button type="submit">Sign in</button></p></form>
<p class="muted">The credential is printed by <code>kiln-server admin operator-credential</code> on the control plane. The session lasts an hour.</p>`;
}

/**
 * The operator console (issue 20): pages of the operator surface, for an operator session
 * (`kiln_operator_session`, opened with the bootstrap credential) only — a tenant's session
 * never reaches them, and the operator's cookie, scoped to `/operator`, never reaches a tenant's
 * pages. Every read and mutation is its operator operation performed in-process through the
 * router's own security check, validation and handler (performAsOperator), so the drain and
 * undrain buttons are audited exactly as the API's.
 */
export function registerOperatorPages(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const contextOf = (request: FastifyRequest, reply: FastifyReply): OperatorPageContext => ({
    deps,
    handlers,
    request,
    reply,
  });
  const send = (reply: FastifyReply, status: number, operator: OperatorPrincipal | null, title: string, body: string) =>
    sendPage(
      reply,
      status,
      operatorPage({ title, operator: operator?.principal ?? null, body, path: reply.request.url }),
    );

  /** The operator's page context; without an operator session the request is sent to sign in. */
  async function open(
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<{ ctx: OperatorPageContext; operator: OperatorPrincipal } | null> {
    const operator = await signedInOperator(deps, request);
    if (operator === null) {
      await reply.redirect("/operator", 303);
      return null;
    }
    return { ctx: contextOf(request, reply), operator };
  }

  /** A refusal (its code and detail, a not-yet-served operation included) as a page; other errors go on. */
  function refused(
    reply: FastifyReply,
    operator: OperatorPrincipal | null,
    title: string,
    error: unknown,
    back: { href: string; label: string } = { href: "/operator", label: "Operator console" },
  ) {
    if (!(error instanceof Refusal)) throw error;
    const notYet = error.code === "not_implemented" ? " This build does not serve it yet." : "";
    return send(
      reply,
      error.status,
      operator,
      title,
      `<p class="notice" id="refusal" data-code="${escapeHtml(error.code)}">${escapeHtml(error.message)}${notYet}</p><p><a href="${escapeHtml(back.href)}">${escapeHtml(back.label)}</a></p>`,
    );
  }

  /** A form's refusal, with the console's header only for a request that still holds a session. */
  async function refusedForm(
    request: FastifyRequest,
    reply: FastifyReply,
    title: string,
    error: unknown,
    back: { href: string; label: string },
  ) {
    return refused(reply, await signedInOperator(deps, request), title, error, back);
  }
  const hostBack = (id: string) => ({ href: hostHref(id), label: `Host ${id}` });

  /** A GET page: opened for the operator, rendered from its operations, a refusal said as a page. */
  const readPage =
    (title: string, render: (ctx: OperatorPageContext, request: FastifyRequest) => Promise<string>) =>
    async (request: FastifyRequest, reply: FastifyReply) => {
      const opened = await open(request, reply);
      if (opened === null) return reply;
      try {
        return send(reply, 200, opened.operator, title, await render(opened.ctx, request));
      } catch (error) {
        return refused(reply, opened.operator, title, error);
      }
    };

  app.get("/operator", async (request, reply) => {
    const operator = await signedInOperator(deps, request);
    if (operator === null) return send(reply, 200, null, "Operator sign-in", signInForm(""));
    try {
      const states = await performAsOperator(contextOf(request, reply), "operator.platform.states");
      const sections = SECTIONS.map(
        ([href, label, what]) => `<li><a href="${href}">${label}</a> <span class="muted">${what}</span></li>`,
      ).join("");
      return send(
        reply,
        200,
        operator,
        "Operator console",
        `<ul id="sections">${sections}</ul><h2>Operating states</h2>${renderPlatformStates(states)}`,
      );
    } catch (error) {
      return refused(reply, operator, "Operator console", error);
    }
  });

  app.get(
    "/operator/hosts",
    readPage("Hosts", async (ctx) => {
      const hosts = await performAsOperator(ctx, "operator.hosts.list");
      const states = await performAsOperator(ctx, "operator.platform.states");
      return renderHosts(hosts, states.hosts);
    }),
  );

  app.get(
    "/operator/hosts/:id",
    readPage("Host", async (ctx, request) => {
      const id = (request.params as { id: string }).id;
      const detail = await performAsOperator(ctx, "operator.hosts.get", { params: { id } });
      const history = await performAsOperator(ctx, "operator.hosts.history");
      return `<p class="mono" id="host-id">${escapeHtml(detail.host)}</p>${noticeOf((request.query as { notice?: unknown }).notice, HOST_NOTICES)}${renderHostDetail(detail, history)}`;
    }),
  );

  app.get(
    "/operator/hosts/:id/recovery",
    readPage("Host recovery", async (ctx, request) => {
      const id = (request.params as { id: string }).id;
      const recovery = await performAsOperator(ctx, "operator.hosts.recovery.get", { params: { id } });
      return `<p><a href="${escapeHtml(hostHref(recovery.host))}">← host ${escapeHtml(recovery.host)}</a></p>${renderRecovery(recovery)}`;
    }),
  );

  app.get(
    "/operator/placements",
    readPage("Live placements", async (ctx) =>
      renderPlacements(await performAsOperator(ctx, "operator.placements.list")),
    ),
  );

  app.get(
    "/operator/audit",
    readPage("Operator audit", async (ctx, request) => {
      const raw = (request.query as { page?: unknown }).page;
      const entries = await performAsOperator(ctx, "operator.audit.list");
      const pages = Math.max(1, Math.ceil(entries.length / AUDIT_PER_PAGE));
      const asked = typeof raw === "string" && /^[1-9][0-9]{0,5}$/.test(raw) ? Number(raw) : 1;
      return renderAudit(entries, Math.min(asked, pages), AUDIT_PER_PAGE);
    }),
  );

  app.get(
    "/operator/anomalies",
    readPage("Anomalies", async (ctx) =>
      renderAnomalies(
        await performAsOperator(ctx, "operator.anomalies.list"),
        await performAsOperator(ctx, "operator.anomalies.platform.list"),
      ),
    ),
  );

  app.get(
    "/operator/dogfood",
    readPage("Dogfood period", async (ctx) => renderDogfood(await performAsOperator(ctx, "operator.dogfood.period"))),
  );

  // The tenants (operator.tenants.list, a kiln extension), each linked to its controls; the form
  // still opens one by its identifier.
  app.get("/operator/tenants", async (request, reply) => {
    const opened = await open(request, reply);
    if (opened === null) return reply;
    const tenant = (request.query as { tenant?: unknown }).tenant;
    if (typeof tenant === "string" && tenant.trim() !== "") {
      return reply.redirect(`/operator/tenants/${encodeURIComponent(tenant.trim())}`, 303);
    }
    const listed = await performAsOperator(opened.ctx, "operator.tenants.list", { query: { limit: 1000 } });
    return send(
      reply,
      200,
      opened.operator,
      "Tenants",
      `<form method="get" action="/operator/tenants" class="inline" id="open-tenant"><label>Tenant <input name="tenant" required placeholder="acme"></label><button type="submit">Open</button></form>
${renderTenantList(listed)}`,
    );
  });

  app.get(
    "/operator/tenants/:tenant",
    readPage("Tenant controls", async (ctx, request) => {
      const tenant = (request.params as { tenant: string }).tenant;
      const controls = await performAsOperator(ctx, "operator.tenants.controls.get", { params: { tenant } });
      return `<p>${tenantLink(controls.tenant)}</p>${noticeOf((request.query as { notice?: unknown }).notice, TENANT_NOTICES)}${renderTenantControls(controls)}
<h2>Change controls</h2>${tenantControlsForm(controls)}`;
    }),
  );

  registerFormRoutes(app, (scope) => {
    scope.post("/operator/sign-in", async (request, reply) => {
      try {
        await openOperatorSession(contextOf(request, reply), formFields(request).get("credential"));
        return reply.redirect("/operator", 303);
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        const notice = `<p class="notice" id="refusal" data-code="${escapeHtml(error.code)}">${escapeHtml(error.message)}</p>`;
        return send(reply, error.status, null, "Operator sign-in", signInForm(notice));
      }
    });

    scope.post("/operator/sign-out", async (request, reply) => {
      try {
        await performAsOperator(contextOf(request, reply), "operator.session.delete");
        return reply.redirect("/operator", 303);
      } catch (error) {
        return refused(reply, null, "Sign out", error);
      }
    });

    // A form's session and origin are checked by performAsOperator as the router checks them: a
    // cross-site or sessionless post is refused `operator_not_found`, never redirected onward.
    scope.post("/operator/hosts/:id/drain", async (request, reply) => {
      const id = (request.params as { id: string }).id;
      try {
        await performAsOperator(contextOf(request, reply), "operator.hosts.drain", { params: { id } });
        return reply.redirect(`${hostHref(id)}?notice=drained`, 303);
      } catch (error) {
        return refusedForm(request, reply, "Drain host", error, hostBack(id));
      }
    });

    scope.post("/operator/tenants/:tenant/controls", async (request, reply) => {
      const tenant = (request.params as { tenant: string }).tenant;
      const fields = formFields(request);
      const text = (name: string) => fields.get(name)?.trim() ?? "";
      const suspend = text("suspended") === "yes";
      const reason = text("suspension_reason");
      const note = text("note");
      const limits = ["max_running_jobs", "storage_quota_bytes", "bandwidth_bytes_per_month"] as const;
      try {
        await performAsOperator(contextOf(request, reply), "operator.tenants.controls.set", {
          params: { tenant },
          body: {
            expected_version: formNumber(text("expected_version")),
            changes: {
              ...Object.fromEntries(limits.filter((n) => text(n) !== "").map((n) => [n, formNumber(text(n))])),
              // The suspension is changed only when the form changed it (a reason alone changes nothing).
              ...(suspend === (text("was_suspended") === "yes")
                ? {}
                : { suspension: { suspended: suspend, ...(reason === "" ? {} : { reason }) } }),
            },
            ...(note === "" ? {} : { note }),
          },
        });
        return reply.redirect(`/operator/tenants/${encodeURIComponent(tenant)}?notice=saved`, 303);
      } catch (error) {
        return refusedForm(request, reply, "Tenant controls", error, {
          href: `/operator/tenants/${encodeURIComponent(tenant)}`,
          label: `Tenant ${tenant}`,
        });
      }
    });

    // A flag's disposition form: the tenant flag's operation or the platform anomaly's.
    const disposition = (kind: "tenant" | "platform") => async (request: FastifyRequest, reply: FastifyReply) => {
      const id = (request.params as { id: string }).id;
      const fields = formFields(request);
      const note = fields.get("note")?.trim() ?? "";
      const body = {
        // As sent: a value the form does not offer goes to the body's validation (invalid_request).
        disposition: (fields.get("disposition") ?? "") as "acknowledged",
        ...(note === "" ? {} : { note }),
      };
      try {
        const ctx = contextOf(request, reply);
        if (kind === "tenant") await performAsOperator(ctx, "operator.anomalies.disposition", { params: { id }, body });
        else await performAsOperator(ctx, "operator.anomalies.platform.disposition", { params: { id }, body });
        return reply.redirect("/operator/anomalies", 303);
      } catch (error) {
        return refusedForm(request, reply, "Anomaly disposition", error, {
          href: "/operator/anomalies",
          label: "Anomalies",
        });
      }
    };
    scope.post("/operator/anomalies/:id/disposition", disposition("tenant"));
    scope.post("/operator/anomalies/platform/:id/disposition", disposition("platform"));

    scope.post("/operator/hosts/:id/undrain", async (request, reply) => {
      const id = (request.params as { id: string }).id;
      const fields = formFields(request);
      const revision = fields.get("policy_revision") ?? "";
      const note = fields.get("note")?.trim() ?? "";
      try {
        await performAsOperator(contextOf(request, reply), "operator.hosts.undrain", {
          params: { id },
          // A form sends text; a revision that is not digits goes to the body's validation as sent.
          body: {
            policy_revision: (/^[0-9]{1,10}$/.test(revision) ? Number(revision) : revision) as number,
            ...(note === "" ? {} : { note }),
          },
        });
        return reply.redirect(`${hostHref(id)}?notice=undrained`, 303);
      } catch (error) {
        return refusedForm(request, reply, "Undrain host", error, hostBack(id));
      }
    });
  });
}
