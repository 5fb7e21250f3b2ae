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
        await reply.redirect(`/?next=${encodeURIComponent(next)}`, 303);
        return null;
      }
      return { deps, handlers, person, request, reply };
    },
    async send(ctx, status, page) {
      return sendPage(
        ctx.reply,
        status,
        dashboardPage({ ...page, person: ctx.person, tenantName: await tenantName(ctx.person) }),
      );
    },
    async refused(ctx, title, error, back = { href: "/jobs", label: "All jobs" }) {
      if (!(error instanceof Refusal)) throw error;
      return pages.send(ctx, error.status, {
        title,
        body: `<p class="notice" id="refusal" data-code="${escapeHtml(error.code)}">${escapeHtml(error.message)}</p><p><a href="${escapeHtml(back.href)}">${escapeHtml(back.label)}</a></p>`,
      });
    },
  };
  return pages;
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
