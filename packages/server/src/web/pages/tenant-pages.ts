import { type BodyOf, PLATFORM_DEFAULT_SIZE, type ResponseDocumentOf, SIZES } from "@kiln/contract";
import type { FastifyInstance } from "fastify";
import { Refusal } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { formatTime } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { dashboardPages, formFields, formKey, registerFormRoutes } from "./open-page.js";
import { formatBytes, keyField, meter, noticeOf, settingsTable } from "./page-parts.js";
import { type PersonLabel, personLabels } from "./people.js";
import { type PageContext, performAsPerson } from "./perform-as-person.js";
import { performMutationAsPerson } from "./perform-mutation-as-person.js";
import { registerResumePage } from "./resume-page.js";

type TenantSettings = ResponseDocumentOf<"tenant.settings.get">;
type SettingValue = TenantSettings["settings"][number]["value"];

const AUDIT_PER_PAGE = 50;
const NOTICES = { saved: "Settings saved. They take effect from the next admitted job." };
/** The number settings the form offers (log_retention_days is recorded but not applied: not offered). */
const NUMBER_SETTINGS = ["wall_clock_ceiling_seconds", "artifact_retention_days"] as const;

function settingValue(settings: TenantSettings, name: string): SettingValue | undefined {
  return settings.settings.find((s) => s.name === name)?.value;
}

function renderSettingsForm(settings: TenantSettings, mayWrite: boolean): string {
  const disabled = mayWrite ? "" : " disabled";
  const defaultSize = String(settingValue(settings, "default_size") ?? "");
  const allowedRaw = settingValue(settings, "allowed_sizes");
  const allowed = new Set(Array.isArray(allowedRaw) ? allowedRaw : []);
  const sizes = SIZES.map(
    (size) =>
      `<label><input type="checkbox" name="allowed_sizes" value="${size}"${allowed.has(size) ? " checked" : ""}${disabled}> ${size}</label>`,
  ).join(" ");
  const options = SIZES.map(
    (size) => `<option value="${size}"${size === defaultSize ? " selected" : ""}>${size}</option>`,
  ).join("");
  const number = (name: string, label: string) =>
    `<label>${label} <input type="number" name="${name}" value="${escapeHtml(String(settingValue(settings, name) ?? ""))}"${disabled}></label>`;
  return `<form method="post" action="/settings" id="settings-form" class="settings">${keyField()}
<input type="hidden" name="version" value="${settings.version}">
<label>Default size <select name="default_size"${disabled}>${options}</select></label>
<fieldset><legend>Sizes members may pick</legend>${sizes}</fieldset>
${number("wall_clock_ceiling_seconds", "Default wall-clock ceiling (seconds)")}
${number("artifact_retention_days", "Artifact retention (days)")}
<label><input type="checkbox" name="agents_may_submit" value="true"${settingValue(settings, "agents_may_submit") === true ? " checked" : ""}${disabled}> Agent credentials with the submit scope may submit jobs</label>
${mayWrite ? `<button type="submit" id="save-settings">Save at version ${settings.version}</button>` : `<p class="muted">Changing these needs the admin role.</p>`}</form>`;
}

/**
 * What the API records but this runtime does not apply (tenant.settings.get says `not applied`):
 * the page does not offer it as if it did anything, and says so.
 */
function notOffered(settings: TenantSettings): string {
  const names = settings.settings.filter((s) => s.status === "not applied").map((s) => s.name);
  if (names.length === 0) return "";
  return `<p class="muted" id="not-offered">Not offered here: ${names.map((n) => `<code>${escapeHtml(n)}</code>`).join(", ")} — the API records ${names.length === 1 ? "it" : "them"}, but this kiln does not apply ${names.length === 1 ? "it" : "them"} to jobs yet.</p>`;
}

function renderSettings(settings: TenantSettings, mayWrite: boolean, above: string, who: PersonLabel): string {
  const l = settings.limits;
  return `${above}${settings.suspended ? `<p class="failure" id="suspended">The operator suspended this tenant: new submissions are refused.</p>` : ""}
<p class="muted">Version <span id="settings-version">${settings.version}</span>${settings.changed_by === null ? ", never changed" : `, changed by ${who(settings.changed_by)} at ${formatTime(settings.changed_at)}`}.</p>
${renderSettingsForm(settings, mayWrite)}
<h2>Effective settings</h2>${settingsTable(
    "effective-settings",
    settings.settings.filter((s) => s.status !== "not applied"),
  )}${notOffered(settings)}
<h2>Limits set by the operator</h2>
<dl class="facts" id="limits"><dt>Running jobs</dt><dd>${meter("limit-running", l.max_running_jobs.consumption, l.max_running_jobs.limit, String)}</dd>
<dt>Storage</dt><dd>${meter("limit-storage", l.storage_quota_bytes.consumption, l.storage_quota_bytes.limit, formatBytes)}</dd>
<dt>Transfer this month</dt><dd>${meter("limit-bandwidth", l.bandwidth_bytes_per_month.consumption, l.bandwidth_bytes_per_month.limit, formatBytes)}</dd></dl>
<p class="muted">Measured ${formatTime(settings.consumption_measured_at)}. Only the operator changes ${settings.operator_controlled.map((n) => `<code>${escapeHtml(n)}</code>`).join(", ")}.</p>`;
}

/** What a posted settings form changes: the values that differ from the current ones, typed. */
function settingsChanges(fields: URLSearchParams, current: TenantSettings): Record<string, unknown> {
  const changes: Record<string, unknown> = {};
  const differs = (name: string, value: unknown) => {
    if (JSON.stringify(value) !== JSON.stringify(settingValue(current, name))) changes[name] = value;
  };
  differs("default_size", fields.get("default_size") ?? "");
  differs("allowed_sizes", fields.getAll("allowed_sizes"));
  for (const name of NUMBER_SETTINGS) {
    const raw = (fields.get(name) ?? "").trim();
    // Not a number: passed on as typed, so the operation refuses it naming the field.
    differs(name, /^-?\d+$/.test(raw) ? Number(raw) : raw);
  }
  differs("agents_may_submit", fields.get("agents_may_submit") === "true");
  return changes;
}

function renderAudit(page: ResponseDocumentOf<"audit.list">, who: PersonLabel): string {
  if (page.entries.length === 0) return `<p class="muted" id="audit">No changes recorded yet.</p>`;
  const rows = page.entries
    .map(
      (e) =>
        `<tr><td>${formatTime(e.changed_at)}</td><td>${who(e.actor)}</td><td class="mono">${escapeHtml(e.target)}</td><td class="mono">${escapeHtml(e.value)}</td><td>${escapeHtml(e.effective)}</td></tr>`,
    )
    .join("\n");
  const more =
    page.next_cursor === null
      ? ""
      : `<p><a id="more" href="/audit?cursor=${encodeURIComponent(page.next_cursor)}">Older entries →</a></p>`;
  return `<table id="audit"><thead><tr><th>When</th><th>Who</th><th>What</th><th>Value</th><th>Effective</th></tr></thead><tbody>
${rows}</tbody></table>${more}`;
}

function renderOnboarding(o: ResponseDocumentOf<"onboarding.surface">, settings: TenantSettings): string {
  const installation =
    o.installation_active === null
      ? `<p id="installation">This kiln has no source-hosting app configured: submit jobs with <code>kiln cargo test</code> from a checkout.</p>`
      : o.installation_active
        ? `<p id="installation"><span class="status status-passed">installed</span> The source-hosting app is installed and claimed by this tenant.</p>`
        : `<p id="installation"><span class="status status-queued">not installed</span> The source-hosting app is not claimed by this tenant yet.</p>`;
  const links = [
    o.install_url === null
      ? ""
      : `<li><a id="install" href="${escapeHtml(o.install_url)}" rel="noopener noreferrer">Install the app</a> on your organization's repositories.</li>`,
    o.claim_url === null
      ? ""
      : `<li><a id="claim" href="${escapeHtml(o.claim_url)}">Claim the installation</a> for this tenant (the provider confirms you administer it).</li>`,
  ].join("");
  const first =
    o.first_job === null
      ? `<p id="first-job">No job yet. Install the CLI, run <code>kiln login</code>, then <code>kiln cargo test</code> in a workspace.</p>`
      : `<p id="first-job">${o.jobs_total} job${o.jobs_total === 1 ? "" : "s"} so far; the newest: <a href="/jobs/${encodeURIComponent(o.first_job.id)}">${escapeHtml(o.first_job.id)}</a>.</p>`;
  return `${installation}${links === "" ? "" : `<ol>${links}</ol>`}${first}${renderProposedSize(settings)}`;
}

/**
 * The size a job runs at when its submitter names none, as the CLI and the MCP prompt take it:
 * the tenant's `default_size` setting (the platform's default when unset), proposed here with the
 * command that uses it and the sizes the tenant allows instead.
 */
function renderProposedSize(settings: TenantSettings): string {
  const size = String(settingValue(settings, "default_size") ?? PLATFORM_DEFAULT_SIZE);
  const allowed = settingValue(settings, "allowed_sizes");
  const others = (Array.isArray(allowed) ? allowed.map(String) : []).filter((s) => s !== size);
  return `<p id="proposed-size"><code>kiln cargo test</code> runs at <strong class="mono">${escapeHtml(size)}</strong>, this tenant's default size${others.length === 0 ? "" : `; <code>--size</code> names another (${others.map((s) => `<span class="mono">${escapeHtml(s)}</span>`).join(", ")})`}.</p>`;
}

/**
 * The tenant pages: its settings (tenant.settings.get and .write at the version read), the audit
 * trail (audit.list) and onboarding (onboarding.surface), performed in-process as the person.
 */
export function registerTenantPages(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const pages = dashboardPages(deps, handlers);
  registerResumePage(app, deps, handlers);

  async function settingsPage(ctx: PageContext, status: number, above: string) {
    const settings = await performAsPerson(ctx, "tenant.settings.get", {});
    return pages.send(ctx, status, {
      title: "Settings",
      body: renderSettings(
        settings,
        ctx.person.scopes.includes("settings"),
        above,
        await personLabels(ctx, [settings.changed_by]),
      ),
    });
  }

  app.get("/settings", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    try {
      return await settingsPage(ctx, 200, noticeOf((request.query as { notice?: unknown }).notice, NOTICES));
    } catch (error) {
      return pages.refused(ctx, "Settings", error);
    }
  });

  app.get("/audit", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const raw = (request.query as { cursor?: unknown }).cursor;
    try {
      const page = await performAsPerson(ctx, "audit.list", {
        query: { limit: AUDIT_PER_PAGE, ...(typeof raw === "string" && raw !== "" ? { cursor: raw } : {}) },
      });
      return pages.send(ctx, 200, {
        title: "Audit trail",
        body: renderAudit(
          page,
          await personLabels(
            ctx,
            page.entries.map((e) => e.actor),
          ),
        ),
      });
    } catch (error) {
      return pages.refused(ctx, "Audit trail", error);
    }
  });

  app.get("/onboarding", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    try {
      const [onboarding, settings] = await Promise.all([
        performAsPerson(ctx, "onboarding.surface", {}),
        performAsPerson(ctx, "tenant.settings.get", {}),
      ]);
      return pages.send(ctx, 200, { title: "Onboarding", body: renderOnboarding(onboarding, settings) });
    } catch (error) {
      return pages.refused(ctx, "Onboarding", error);
    }
  });

  registerFormRoutes(app, (scope) => {
    scope.post("/settings", async (request, reply) => {
      const ctx = await pages.open(request, reply, "/settings");
      if (ctx === null) return reply;
      const fields = formFields(request);
      try {
        const current = await performAsPerson(ctx, "tenant.settings.get", {});
        const changes = settingsChanges(fields, current);
        if (Object.keys(changes).length === 0) return reply.redirect("/settings", 303);
        const rawVersion = fields.get("version") ?? "";
        const body = {
          version: /^\d+$/.test(rawVersion) ? Number(rawVersion) : rawVersion,
          changes,
        } as unknown as BodyOf<"tenant.settings.write">; // validated against the schema in-process
        await performMutationAsPerson(ctx, "tenant.settings.write", {
          params: {},
          body,
          idempotencyKey: formKey(request),
        });
        return reply.redirect("/settings?notice=saved", 303);
      } catch (error) {
        if (error instanceof Refusal && error.code === "stale_version") {
          const current = String(error.extras.current_version ?? "");
          return settingsPage(
            ctx,
            409,
            `<p class="failure" id="stale-version" data-current-version="${escapeHtml(current)}">These settings changed after you read them (version ${escapeHtml(current)} is current). Nothing was saved; the current values are shown below — make your change again.</p>`,
          );
        }
        return pages.refused(ctx, "Settings", error, { href: "/settings", label: "Back to settings" });
      }
    });
  });
}
