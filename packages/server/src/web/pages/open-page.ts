import { findTenant } from "@kiln/storage";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Principal } from "../../domain/identity/principal.js";
import { Refusal } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { dashboardPage } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { sendPage, signedIn } from "./page-response.js";
import type { PageContext } from "./perform-as-person.js";

/** What every dashboard route of a tenant member needs: open the page, render it, say a refusal. */
export interface DashboardPages {
  /** The signed-in person's context; a visitor is sent to sign in and come back to `next`. */
  open(request: FastifyRequest, reply: FastifyReply, next?: string): Promise<PageContext | null>;
  /** Sends a dashboard page as the context's person. */
  send(
    ctx: PageContext,
    status: number,
    page: Omit<Parameters<typeof dashboardPage>[0], "person" | "tenantName">,
  ): Promise<FastifyReply>;
  /** A refusal (its code and detail) as a page with the refusal's status; any other error is thrown on. */
  refused(
    ctx: PageContext,
    title: string,
    error: unknown,
    back?: { href: string; label: string },
  ): Promise<FastifyReply>;
}

export function dashboardPages(deps: AppDeps, handlers: HandlerTable): DashboardPages {
  async function tenantName(person: Principal): Promise<string> {
    return (await findTenant(deps.storage, person.tenantId))?.displayName ?? person.tenantId;
  }
  const pages: DashboardPages = {
    async open(request, reply, next = request.url) {
      const person = await signedIn(deps, request);
      if (person === null) {
        // A form posted after the session ended (Retry job, Save settings): the action is kept —
        // after signing in the person confirms it on /resume, never performed unseen.
        const back = request.method === "POST" ? resumePath(request.url, formFields(request), next) : next;
        await reply.redirect(`/?next=${encodeURIComponent(back)}`, 303);
        return null;
      }
      return { deps, handlers, person, request, reply };
    },
    async send(ctx, status, page) {
      return sendPage(
        ctx.reply,
        status,
        dashboardPage({
          ...page,
          person: ctx.person,
          tenantName: await tenantName(ctx.person),
          path: page.path ?? ctx.request.url,
        }),
      );
    },
    async refused(ctx, title, error, back = { href: "/jobs", label: "All jobs" }) {
      if (!(error instanceof Refusal)) throw error;
      const words = inUserWords(error, ctx.person, await tenantName(ctx.person));
      return pages.send(ctx, error.status, {
        title,
        body: `<p class="notice" id="refusal" data-code="${escapeHtml(error.code)}">${escapeHtml(words)}</p><p><a href="${escapeHtml(back.href)}">${escapeHtml(back.label)}</a></p>`,
      });
    },
  };
  return pages;
}

/** Where a form posted without a session is confirmed after signing in: its action, fields and page. */
export function resumePath(action: string, fields: FormFields, back: string): string {
  const query = new URLSearchParams({ action: action.split("?")[0] ?? "/", back });
  for (const [name, value] of fields) if (name !== "idempotency_key") query.append(`field.${name}`, value);
  return `/resume?${query.toString()}`;
}

/** What a field of a form or filter is called on the page (`query.repository` → `Repository`). */
function fieldLabel(path: string): string {
  const name =
    path
      .replace(/^(body|query|params)\./, "")
      .split(".")
      .pop() ?? path;
  const words = name.replaceAll("_", " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/**
 * A refusal as the page says it: what went wrong and the next step in the person's words — no
 * operation names, no schema's regular expressions (the API keeps its exact detail).
 */
export function inUserWords(refusal: Refusal, person: Principal, tenant: string): string {
  if (refusal.code === "role_required") {
    const role = typeof refusal.extras.role === "string" ? refusal.extras.role : "a higher";
    return `This needs the ${role} role in ${tenant}; you are ${person.role === null ? "not a member" : `a ${person.role}`}. Ask an owner or admin of ${tenant} to give you the ${role} role.`;
  }
  if (refusal.code === "invalid_request") {
    const detail = refusal.message;
    const field = /^((?:body|query|params)(?:\.[\w[\]]+)+)\s+(.*)$/.exec(detail);
    if (field !== null) {
      const label = fieldLabel(field[1] ?? "");
      const rest = field[2] ?? "";
      if (/repository$/i.test(label)) return `${label}: write it as owner/name, for example acme/widget.`;
      if (/must match pattern|must match format/.test(rest))
        return `${label} is not written the way it is expected; check it and try again.`;
      const said = rest
        .replace(/^must be integer$/, "must be a whole number")
        .replace(/^must be >= (\S+)$/, "must be at least $1")
        .replace(/^must be <= (\S+)$/, "must be at most $1");
      return `${label} ${said}.`.replace(/\.\.$/, ".");
    }
    return detail;
  }
  return refusal.message;
}

/** A posted HTML form's fields (a repeated field, such as checked scopes, keeps every value). */
export type FormFields = URLSearchParams;

/**
 * Registers routes whose requests are HTML forms: only they parse a urlencoded body (the API
 * parses JSON and bytes only), into the form's fields.
 */
export function registerFormRoutes(app: FastifyInstance, routes: (scope: FastifyInstance) => void): void {
  void app.register(async (scope) => {
    scope.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_request, body, done) =>
      done(null, new URLSearchParams(String(body))),
    );
    routes(scope);
  });
}

/** The posted form's fields (empty when the request carried none). */
export function formFields(request: FastifyRequest): FormFields {
  return request.body instanceof URLSearchParams ? request.body : new URLSearchParams();
}

/** The posted form's idempotency key (`idempotency_key`), which performMutationAsPerson checks. */
export function formKey(request: FastifyRequest): unknown {
  return formFields(request).get("idempotency_key") ?? undefined;
}
