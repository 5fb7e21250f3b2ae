import type { FastifyInstance } from "fastify";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { escapeHtml } from "./html.js";
import { dashboardPages } from "./open-page.js";
import { keyField } from "./page-parts.js";
import { ownPath } from "./register-pages.js";

/** What a kept action does, in the words of the button that posted it. */
function labelOf(action: string, fields: URLSearchParams): string {
  const job = /^\/jobs\/([^/]+)\/(retry|cancel)$/.exec(action);
  if (job !== null) return `${job[2] === "retry" ? "Retry" : "Cancel"} job ${decodeURIComponent(job[1] ?? "")}`;
  if (action === "/repositories") return `Onboard ${fields.get("repository") ?? "the repository"}`;
  if (action === "/settings" || action.endsWith("/settings")) return "Save the settings";
  return "Send the form again";
}

/**
 * /resume: a form posted after the session ended (open-page.ts sends the person to sign in and
 * back here). The kept action is shown with its button and a fresh idempotency key, to be
 * confirmed — never performed unseen, since a link could lead anyone here.
 */
export function registerResumePage(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const pages = dashboardPages(deps, handlers);
  app.get("/resume", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const query = new URLSearchParams(request.url.split("?")[1] ?? "");
    const action = ownPath(query.get("action"), deps.publicOrigin);
    const back = ownPath(query.get("back"), deps.publicOrigin);
    const fields = new URLSearchParams();
    for (const [name, value] of query) if (name.startsWith("field.")) fields.append(name.slice(6), value);
    const hidden = [...fields]
      .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
      .join("");
    const label = labelOf(action, fields);
    return pages.send(ctx, 200, {
      title: "Continue where you were",
      path: back,
      body: `<p class="notice" id="resume-notice">Your session had ended, so this was not done yet: <strong>${escapeHtml(label)}</strong>. You are signed in again; do it now?</p>
<form method="post" action="${escapeHtml(action)}" class="actions" id="resume-form">${keyField()}${hidden}<button type="submit" id="resume">${escapeHtml(label)}</button> <a href="${escapeHtml(back)}" id="resume-back">Leave it</a></form>`,
    });
  });
}
