import type { BodyOf, ResponseDocumentOf } from "@kiln/contract";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { Refusal } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { advisoryGuidePath, registerAdvisoryGuidePage } from "./advisory-guide-page.js";
import { formatTime } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { dashboardPages, formFields, formKey, registerFormRoutes } from "./open-page.js";
import { formatBytes, keyField, meter, noticeOf, postButton, settingsTable } from "./page-parts.js";
import { type PersonLabel, personLabels } from "./people.js";
import { type PageContext, performAsPerson } from "./perform-as-person.js";
import { performMutationAsPerson } from "./perform-mutation-as-person.js";
import { renderRepositoryTests } from "./repository-test-parts.js";
import { typedRepository } from "./typed-repository.js";

type Repository = ResponseDocumentOf<"repositories.get">;
type Settings = ResponseDocumentOf<"repositories.settings.get">;

const REPOSITORIES_PER_PAGE = 50;
const NOTICES = {
  saved: "Settings saved. They take effect from the next admitted job.",
  purged: "Lineage purged: its cached build state is gone and the next matching job starts cold.",
  dismissed: "Advisory dismissed. A changed measurement brings a new advisory.",
  onboarded: "Repository onboarded: its jobs are admitted from now on. Run kiln cargo test in a checkout of it.",
  already: "This repository was already onboarded; nothing changed.",
};

/** The repository a page path names, as the operations' path parameters. */
function repositoryParams(request: FastifyRequest): { owner: string; name: string } {
  const { owner, name } = request.params as { owner: string; name: string };
  return { owner, name };
}

const repositoryPath = (p: { owner: string; name: string }) =>
  `/repositories/${encodeURIComponent(p.owner)}/${encodeURIComponent(p.name)}`;

/**
 * The onboarding form (repositories.onboard, a kiln extension) for a tenant admin; others are
 * told who can. The source-hosting app stays the way to get check runs.
 */
function renderOnboardForm(mayOnboard: boolean, typed = ""): string {
  if (!mayOnboard) {
    return `<p class="muted" id="onboard-hidden">An admin or owner of this tenant can onboard a repository here (or with <code>kiln repos add owner/name</code>).</p>`;
  }
  return `<form method="post" action="/repositories" class="filters" id="onboard-form">${keyField()}
<label>Onboard a repository<input name="repository" id="onboard-repository" value="${escapeHtml(typed)}" placeholder="owner/name or its URL" required autocomplete="off"></label>
<button type="submit" id="onboard">Onboard</button></form>
<p class="muted">Its jobs are admitted from then on (<code>kiln cargo test</code> in a checkout). Check runs on its commits also need the <a href="/onboarding">source-hosting app</a>.</p>`;
}

function renderList(page: ResponseDocumentOf<"repositories.list">, mayOnboard: boolean): string {
  const form = renderOnboardForm(mayOnboard);
  if (page.repositories.length === 0) {
    return `${form}<p class="notice" id="no-repositories">No repositories are onboarded yet.${mayOnboard ? " Onboard one above," : ""} See <a href="/onboarding">Onboarding</a>.</p>`;
  }
  const rows = page.repositories
    .map((r) => {
      const [owner = "", name = ""] = r.repository.split("/");
      const lineages = page.lineages.filter((l) => l.repository === r.repository).length;
      const advisories = page.advisories.filter((a) => a.repository === r.repository).length;
      return `<tr data-repository="${escapeHtml(r.repository)}"><td><a href="${escapeHtml(repositoryPath({ owner, name }))}">${escapeHtml(r.repository)}</a></td><td class="num">${lineages}</td><td class="num">${escapeHtml(formatBytes(r.total_bytes))}</td><td class="num">${advisories}</td></tr>`;
    })
    .join("\n");
  const more =
    page.next_cursor === null
      ? ""
      : `<p><a id="more" href="/repositories?cursor=${encodeURIComponent(page.next_cursor)}">More repositories →</a></p>`;
  return `${form}<p>Lineage storage: ${meter("storage", page.total_bytes, page.storage_quota_bytes, formatBytes)}</p>
<table id="repositories"><thead><tr><th>Repository</th><th>Lineages</th><th>Storage</th><th>Advisories</th></tr></thead><tbody>
${rows}</tbody></table>${more}`;
}

function renderLineages(repo: Repository, path: string, mayPurge: boolean): string {
  if (repo.lineages.length === 0)
    return `<p class="muted" id="lineages">No lineages yet: the first job starts cold.</p>`;
  const rows = repo.lineages
    .map(
      (
        l,
      ) => `<tr data-lineage="${escapeHtml(l.lineage)}"><td class="mono">${escapeHtml(l.class)}</td><td class="mono">${escapeHtml(l.lineage)}</td>
<td class="num">${escapeHtml(formatBytes(l.bytes))}</td><td>${formatTime(l.last_used_at)}</td><td>${
        mayPurge
          ? `<form method="post" action="${escapeHtml(path)}/purges" class="purge">${keyField()}<input type="hidden" name="lineage" value="${escapeHtml(l.lineage)}">
<label>Type <code>${escapeHtml(l.lineage)}</code> to confirm <input name="confirm" autocomplete="off" required></label> <button type="submit">Purge</button></form>`
          : `<span class="muted">an admin can purge</span>`
      }</td></tr>`,
    )
    .join("\n");
  return `<table id="lineages"><thead><tr><th>Class</th><th>Lineage</th><th>Bytes</th><th>Last used</th><th>Purge (the next job starts cold)</th></tr></thead><tbody>
${rows}</tbody></table>`;
}

function renderAdvisories(repo: Repository, path: string, mayDismiss: boolean): string {
  if (repo.advisories.length === 0) return `<p class="muted" id="advisories">No advisories.</p>`;
  return `<ul id="advisories">${repo.advisories
    .map(
      (a) => `<li data-advisory="${escapeHtml(a.id)}"><strong>${escapeHtml(a.recommendation)}</strong>
<div>Measured: <span class="mono">${escapeHtml(a.measured_value)}</span> <span class="muted">(basis ${escapeHtml(a.basis_signature)})</span>
· <a class="advisory-guide" href="${escapeHtml(advisoryGuidePath(a.remediation_href))}">how to act on it</a></div>${
        mayDismiss
          ? postButton(`${path}/advisories/${encodeURIComponent(a.id)}/dismissal`, "Dismiss", ` class="dismiss"`)
          : ""
      }</li>`,
    )
    .join("")}</ul>`;
}

/** The settings form at the version read; a stale write shows it again with the current values. */
function renderSettingsForm(settings: Settings, path: string, mayWrite: boolean, who: PersonLabel): string {
  const checkbox = (name: string, checked: boolean, label: string) =>
    `<label><input type="checkbox" name="${name}" value="true"${checked ? " checked" : ""}${mayWrite ? "" : " disabled"}> ${label}</label>`;
  const form = `<form method="post" action="${escapeHtml(path)}/settings" id="settings-form" class="settings">${keyField()}
<input type="hidden" name="version" value="${settings.version}">
${checkbox("affected_tests", settings.affected_tests, "Run only the affected packages' tests (cargo test jobs that select none)")}
${checkbox("total_injection_opt_out", settings.total_injection_opt_out, "Inject no build settings at all")}
<label>Wall-clock ceiling (seconds, ${settings.minimum_wall_clock_ceiling_seconds}–${settings.platform_default_wall_clock_ceiling_seconds})
<input type="number" name="wall_clock_ceiling_seconds" value="${settings.wall_clock_ceiling_seconds}" min="${settings.minimum_wall_clock_ceiling_seconds}" max="${settings.platform_default_wall_clock_ceiling_seconds}"${mayWrite ? "" : " disabled"}></label>
${mayWrite ? `<button type="submit" id="save-settings">Save at version ${settings.version}</button>` : `<p class="muted">Changing these needs the admin role.</p>`}</form>`;
  return `<p class="muted">Version <span id="settings-version">${settings.version}</span>, changed by ${who(settings.changed_by)} at ${formatTime(settings.changed_at)}. ${escapeHtml(settings.effective)}</p>
${form}<h3>Injected build settings</h3>${settingsTable("injected", [...settings.injected, settings.wall_clock_ceiling])}`;
}

/** The changes a posted settings form asks for: only the values that differ from the current ones. */
function settingsChanges(fields: URLSearchParams, current: Settings): Record<string, unknown> {
  const changes: Record<string, unknown> = {};
  const affected = fields.get("affected_tests") === "true";
  if (affected !== current.affected_tests) changes.affected_tests = affected;
  const optOut = fields.get("total_injection_opt_out") === "true";
  if (optOut !== current.total_injection_opt_out) changes.total_injection_opt_out = optOut;
  const rawCeiling = (fields.get("wall_clock_ceiling_seconds") ?? "").trim();
  // Not a number: passed on as typed, so the operation refuses it naming the field.
  const ceiling = /^-?\d+$/.test(rawCeiling) ? Number(rawCeiling) : rawCeiling;
  if (ceiling !== current.wall_clock_ceiling_seconds) changes.wall_clock_ceiling_seconds = ceiling;
  return changes;
}

/**
 * The repository pages (repositories.list, repositories.get, repositories.settings.get) and their
 * forms (repositories.settings.write at the version read, repositories.lineages.purge with its
 * typed confirmation, repositories.advisories.dismiss), performed in-process as the person.
 */
export function registerRepositoryPages(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const pages = dashboardPages(deps, handlers);
  const back = { href: "/repositories", label: "All repositories" };
  registerAdvisoryGuidePage(app, deps, handlers);

  app.get("/repositories", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const raw = (request.query as { cursor?: unknown }).cursor;
    try {
      const page = await performAsPerson(ctx, "repositories.list", {
        query: { limit: REPOSITORIES_PER_PAGE, ...(typeof raw === "string" && raw !== "" ? { cursor: raw } : {}) },
      });
      return pages.send(ctx, 200, {
        title: "Repositories",
        body: renderList(page, ctx.person.scopes.includes("admin")),
      });
    } catch (error) {
      return pages.refused(ctx, "Repositories", error, back);
    }
  });

  /** The repository page, with a notice or a refusal above it and the settings form as given. */
  async function repositoryPage(
    ctx: PageContext,
    params: { owner: string; name: string },
    status: number,
    above: string,
  ) {
    const repo = await performAsPerson(ctx, "repositories.get", { params });
    const path = repositoryPath(params);
    const scopes = ctx.person.scopes;
    let settingsPart: string;
    try {
      const settings = await performAsPerson(ctx, "repositories.settings.get", { params });
      settingsPart = renderSettingsForm(
        settings,
        path,
        scopes.includes("settings"),
        await personLabels(ctx, [settings.changed_by]),
      );
    } catch (error) {
      if (!(error instanceof Refusal) || error.code !== "role_required") throw error;
      settingsPart = `<p class="muted" id="settings-hidden">Reading build settings needs the member role.</p>`;
    }
    const tests = await renderRepositoryTests(ctx, params);
    return pages.send(ctx, status, {
      title: repo.repository,
      body: `${above}<p><a href="/jobs?repository=${encodeURIComponent(repo.repository)}">Jobs of ${escapeHtml(repo.repository)}</a></p>
<section id="part-storage"><h2>Lineages</h2><p>This repository: ${escapeHtml(formatBytes(repo.total_bytes))}. Tenant storage quota: ${escapeHtml(formatBytes(repo.storage_quota_bytes))}.</p>${renderLineages(repo, path, scopes.includes("admin"))}</section>
<section id="part-tests"><h2>Tests</h2>${tests}</section>
<section id="part-advisories"><h2>Advisories</h2>${renderAdvisories(repo, path, scopes.includes("settings"))}</section>
<section id="part-settings"><h2>Settings</h2>${settingsPart}</section>`,
    });
  }

  app.get("/repositories/:owner/:name", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    try {
      return await repositoryPage(
        ctx,
        repositoryParams(request),
        200,
        noticeOf((request.query as { notice?: unknown }).notice, NOTICES),
      );
    } catch (error) {
      return pages.refused(ctx, "Repository", error, back);
    }
  });

  registerFormRoutes(app, (scope) => {
    scope.post("/repositories", async (request, reply) => {
      const ctx = await pages.open(request, reply, "/repositories");
      if (ctx === null) return reply;
      const typed = formFields(request).get("repository") ?? "";
      try {
        const onboarded = await performMutationAsPerson(ctx, "repositories.onboard", {
          params: {},
          body: { repository: typedRepository(typed) },
          idempotencyKey: formKey(request),
        });
        const [owner = "", name = ""] = onboarded.repository.split("/");
        return reply.redirect(
          `${repositoryPath({ owner, name })}?notice=${onboarded.created ? "onboarded" : "already"}`,
          303,
        );
      } catch (error) {
        if (error instanceof Refusal && error.code === "invalid_request") {
          // What was typed stays in the form, with what to change.
          return pages.send(ctx, 400, {
            title: "Repositories",
            path: "/repositories",
            body: `<p class="notice" id="refusal" data-code="invalid_request">Repository: write it as owner/name, for example acme/widget, or paste its URL.</p>${renderOnboardForm(true, typed)}`,
          });
        }
        return pages.refused(ctx, "Onboard a repository", error, back);
      }
    });

    scope.post("/repositories/:owner/:name/settings", async (request, reply) => {
      const params = repositoryParams(request);
      const ctx = await pages.open(request, reply, repositoryPath(params));
      if (ctx === null) return reply;
      const fields = formFields(request);
      try {
        const current = await performAsPerson(ctx, "repositories.settings.get", { params });
        const changes = settingsChanges(fields, current);
        if (Object.keys(changes).length === 0) return reply.redirect(repositoryPath(params), 303);
        const rawVersion = fields.get("version") ?? "";
        const body = {
          version: /^\d+$/.test(rawVersion) ? Number(rawVersion) : rawVersion,
          changes,
        } as unknown as BodyOf<"repositories.settings.write">; // validated against the schema in-process
        await performMutationAsPerson(ctx, "repositories.settings.write", {
          params,
          body,
          idempotencyKey: formKey(request),
        });
        return reply.redirect(`${repositoryPath(params)}?notice=saved`, 303);
      } catch (error) {
        if (error instanceof Refusal && error.code === "stale_version") {
          // The page read an older version: say so and show the current values to decide again.
          const current = String(error.extras.current_version ?? "");
          return repositoryPage(
            ctx,
            params,
            409,
            `<p class="failure" id="stale-version" data-current-version="${escapeHtml(current)}">These settings changed after you read them (version ${escapeHtml(current)} is current). Nothing was saved; the current values are shown below — make your change again.</p>`,
          );
        }
        return pages.refused(ctx, "Repository settings", error, { href: repositoryPath(params), label: "Back" });
      }
    });

    scope.post("/repositories/:owner/:name/purges", async (request, reply) => {
      const params = repositoryParams(request);
      const ctx = await pages.open(request, reply, repositoryPath(params));
      if (ctx === null) return reply;
      const fields = formFields(request);
      try {
        await performMutationAsPerson(ctx, "repositories.lineages.purge", {
          params,
          body: { lineage: fields.get("lineage") ?? "", confirm: fields.get("confirm") ?? "" },
          idempotencyKey: formKey(request),
        });
        return reply.redirect(`${repositoryPath(params)}?notice=purged`, 303);
      } catch (error) {
        return pages.refused(ctx, "Purge lineage", error, { href: repositoryPath(params), label: "Back" });
      }
    });

    scope.post("/repositories/:owner/:name/advisories/:advisory/dismissal", async (request, reply) => {
      const params = repositoryParams(request);
      const advisory = (request.params as { advisory: string }).advisory;
      const ctx = await pages.open(request, reply, repositoryPath(params));
      if (ctx === null) return reply;
      try {
        await performMutationAsPerson(ctx, "repositories.advisories.dismiss", {
          params: { ...params, advisory },
          idempotencyKey: formKey(request),
        });
        return reply.redirect(`${repositoryPath(params)}?notice=dismissed`, 303);
      } catch (error) {
        return pages.refused(ctx, "Dismiss advisory", error, { href: repositoryPath(params), label: "Back" });
      }
    });
  });
}
