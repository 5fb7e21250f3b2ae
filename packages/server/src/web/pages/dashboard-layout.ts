import type { Principal } from "../../domain/identity/principal.js";
import { ANSI_STYLE } from "./ansi-log.js";
import { escapeHtml } from "./html.js";
import { LIVE_VIEW_STYLE, LOG_VIEW_STYLE } from "./job-page-style.js";
import { navigationLinks, pageHead } from "./layout-script.js";
import { BASE_STYLE } from "./page-style.js";

const STYLE = `${BASE_STYLE}.status-passed{background:#d1f2d9;color:#135c25}.status-failed{background:#fbd5d5;color:#8a1111}
.status-running,.status-cancellation_requested{background:#d6e6ff;color:#0b3d91}
.status-queued{background:#fff1c2;color:#6b4e00}.status-cancelled,.status-ignored,.status-skipped{background:#e5e5e5;color:#444}
.summary{display:flex;gap:.8rem;margin:0 0 1rem;flex-wrap:wrap}
.summary div{background:#fff;border:1px solid #e5e5e5;border-radius:6px;padding:.5rem 1rem;min-width:7rem}
.summary strong{display:block;font-size:1.4rem}
form.filters{display:flex;gap:.6rem;flex-wrap:wrap;align-items:end;margin:0 0 1rem}
form.filters label{display:flex;flex-direction:column;font-size:.8rem;color:#555}
form.filters input,form.filters select,form.filters button{font:inherit;padding:.25rem .4rem}
.failure{background:#fff4f4;border:1px solid #f3c2c2;padding:.6rem .8rem;border-radius:6px;margin:1rem 0}
#failures ol{padding-left:1.2rem}#failures li{margin:.4rem 0}#failures pre,#tests pre.panic{margin:.3rem 0;white-space:pre-wrap}
div.filters{display:flex;gap:1rem;align-items:center;margin:.4rem 0}
td.timeline,th.timeline{width:40%}.bar{height:.8rem;border-radius:3px;background:#9cc4ff}.bar-passed{background:#6bd66b}
.bar-failed{background:#ff6b6b}.bar-cancelled,.bar-skipped{background:#bbb}.actions{display:flex;gap:.6rem;margin:1rem 0}
.actions button{font:inherit;padding:.3rem .9rem;cursor:pointer}.status-warm,.status-applied{background:#d1f2d9;color:#135c25}
.status-cold,.status-not.applied{background:#fff1c2;color:#6b4e00}
.meter{display:inline-block;vertical-align:middle;width:12rem;height:.7rem;background:#e5e5e5;border-radius:4px;overflow:hidden}
.meter-fill{display:block;height:100%;background:#6b9bd6}.meter-high{background:#d66b6b}
form.settings{display:flex;flex-direction:column;gap:.6rem;align-items:flex-start;background:#fff;border:1px solid #e5e5e5;border-radius:6px;padding:.8rem 1rem;margin:0 0 1rem}
form.settings fieldset{border:1px solid #e5e5e5;display:flex;gap:.8rem;flex-wrap:wrap}form.settings input,form.settings select,form.settings button{font:inherit;padding:.2rem .4rem}
form.inline{display:inline;margin:0}form.inline button,form.purge button{font:inherit;font-size:.85rem;padding:.1rem .6rem;cursor:pointer}
form.purge input{font:inherit;width:10rem}input.secret{font-size:.9rem;padding:.3rem;background:#fffbe6;border:1px solid #e0c060}
figure.chart{margin:.5rem 0 1rem;background:#fff;border:1px solid #e5e5e5;border-radius:6px;padding:.6rem;overflow-x:auto}
figure.chart figcaption{font-size:.8rem;color:#555}figure.chart rect{fill:#6b9bd6}figure.chart text{font-size:12px;fill:#333}
#advisories li{margin:.4rem 0 .8rem}
.status-flaky{background:#ffe2c2;color:#7a3d00}.bar-unit{background:#9cc4ff}.bar-critical{background:#e0803a}tr.critical td.mono{font-weight:600}
td.runs a.run{text-decoration:none;padding:0 .1rem}a.run-failed{color:#8a1111}a.run-flaky{color:#b35c00}a.run-passed{color:#135c25}
@media (prefers-color-scheme:dark){.status-passed,.status-warm,.status-applied{background:#16351f;color:#8fe0a5}
.status-failed{background:#451a1a;color:#f6a6a6}.status-running,.status-cancellation_requested{background:#172b4d;color:#a8c7fa}
.status-queued,.status-cold,.status-not.applied{background:#3a3011;color:#f1d78a}.status-cancelled,.status-ignored,.status-skipped{background:#33343a;color:#c4c4cc}
.summary div,form.settings,figure.chart{background:#1c1d21;border-color:#33343a}.failure{background:#3a1c1c;border-color:#6b2a2a}
form.filters label,figure.chart figcaption{color:#a1a1aa}figure.chart text{fill:#d4d4d8}.meter{background:#33343a}
form.settings fieldset{border-color:#33343a}input.secret{background:#2e2913;border-color:#5e5120}}
${ANSI_STYLE}
${LOG_VIEW_STYLE}
${LIVE_VIEW_STYLE}`;

/** The dashboard's sections, each a page of its own. */
const SECTIONS = [
  ["/jobs", "Jobs"],
  ["/repositories", "Repositories"],
  ["/usage", "Usage"],
  ["/credentials", "Credentials"],
  ["/cli-tokens", "CLI tokens"],
  ["/settings", "Settings"],
  ["/audit", "Audit"],
  ["/onboarding", "Onboarding"],
] as const;

/** The dashboard's navigation, the section holding `path` marked as the current page. */
export function navigation(path: string | undefined): string {
  return navigationLinks(SECTIONS, path);
}

/** A dashboard page: the navigation, who is signed in (with sign-out), and the body. */
export function dashboardPage(input: {
  title: string;
  person: Principal;
  tenantName: string;
  body: string;
  scripts?: readonly string[];
  /** `data-*` attributes of the body: what the page's script reads (the job's id, …). */
  bodyData?: Readonly<Record<string, string>>;
  /** The request's path: its section is marked current in the navigation. */
  path?: string;
  /**
   * A page about one thing with a status (a job): the tab reads `<status> · <subject> · kiln` and
   * its icon shows the status, both following the status as the page's script updates it.
   */
  status?: { value: string; subject: string };
}): string {
  const p = input.person;
  const status = input.status;
  const title =
    status === undefined ? `${input.title} · kiln` : `${status.value.replaceAll("_", " ")} · ${status.subject} · kiln`;
  const bodyData = { ...(input.bodyData ?? {}), ...(status === undefined ? {} : { "title-subject": status.subject }) };
  return `<!doctype html>
<html lang="en"><head>${pageHead(title, status?.value, STYLE, input.scripts ?? [])}</head>
<body${Object.entries(bodyData)
    .map(([name, value]) => ` data-${escapeHtml(name)}="${escapeHtml(value)}"`)
    .join("")}><header><a class="brand" href="/">kiln</a><nav>${navigation(input.path)}</nav>
<div class="who"><span id="signed-in-as">${escapeHtml(p.displayName)} · ${escapeHtml(p.role ?? "")} of ${escapeHtml(input.tenantName)}</span>
<form method="post" action="/auth/sign-out"><button type="submit" id="sign-out">Sign out</button></form></div></header>
<main><h1>${escapeHtml(input.title)}</h1>${input.body}</main></body></html>`;
}

/**
 * The page for a path nothing serves (404), with the navigation so a person finds their way;
 * the API's paths keep their JSON refusal.
 */
export function notFoundPage(path: string): string {
  return `<!doctype html>
<html lang="en"><head>${pageHead("Page not found · kiln", undefined, STYLE, [])}</head>
<body><header><a class="brand" href="/">kiln</a><nav>${navigation(undefined)}</nav></header>
<main><h1>Page not found</h1><p class="notice" id="not-found">There is no page at <code>${escapeHtml(path)}</code>. It may have moved, or the link is mistyped.</p>
<p>Go to <a href="/jobs">your jobs</a>, <a href="/repositories">your repositories</a> or <a href="/">the start page</a>.</p></main></body></html>`;
}

/** A status as a coloured badge. */
export function statusBadge(status: string): string {
  return `<span class="status status-${escapeHtml(status)}">${escapeHtml(status.replaceAll("_", " "))}</span>`;
}

/** Milliseconds as a short human duration. */
export function formatDuration(ms: number | null): string {
  if (ms === null) return "—";
  if (ms < 1000) return `${ms} ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
}

/**
 * A timestamp as `YYYY-MM-DD HH:MM:SS UTC`, the UTC value also in the tooltip: the layout
 * script shows the text in the viewer's own time zone, the tooltip keeping UTC.
 */
export function formatTime(at: string | null): string {
  if (at === null) return "—";
  const utc = `${at.slice(0, 19).replace("T", " ")} UTC`;
  return `<time datetime="${escapeHtml(at)}" title="${escapeHtml(utc)}">${escapeHtml(utc)}</time>`;
}
