import type { Principal } from "../../domain/identity/principal.js";
import { ANSI_STYLE } from "./ansi-log.js";
import { escapeHtml } from "./html.js";
import { LIVE_VIEW_STYLE, LOG_VIEW_STYLE } from "./job-page-style.js";
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
${ANSI_STYLE}
${LOG_VIEW_STYLE}
${LIVE_VIEW_STYLE}`;

/** The dashboard's sections, each a page of its own. */
const NAVIGATION = [
  ["/jobs", "Jobs"],
  ["/repositories", "Repositories"],
  ["/usage", "Usage"],
  ["/credentials", "Credentials"],
  ["/cli-tokens", "CLI tokens"],
  ["/settings", "Settings"],
  ["/audit", "Audit"],
  ["/onboarding", "Onboarding"],
]
  .map(([href, label]) => `<a href="${href}">${label}</a>`)
  .join("");

/** A dashboard page: the navigation, who is signed in (with sign-out), and the body. */
export function dashboardPage(input: {
  title: string;
  person: Principal;
  tenantName: string;
  body: string;
  scripts?: readonly string[];
  /** `data-*` attributes of the body: what the page's script reads (the job's id, …). */
  bodyData?: Readonly<Record<string, string>>;
}): string {
  const p = input.person;
  const scripts = (input.scripts ?? []).map((src) => `<script src="${escapeHtml(src)}" defer></script>`).join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(input.title)} · kiln</title><style>${STYLE}</style>${scripts}</head>
<body${Object.entries(input.bodyData ?? {})
    .map(([name, value]) => ` data-${escapeHtml(name)}="${escapeHtml(value)}"`)
    .join("")}><header><a class="brand" href="/">kiln</a><nav>${NAVIGATION}</nav>
<div class="who"><span id="signed-in-as">${escapeHtml(p.displayName)} · ${escapeHtml(p.role ?? "")} of ${escapeHtml(input.tenantName)}</span>
<form method="post" action="/auth/sign-out"><button type="submit" id="sign-out">Sign out</button></form></div></header>
<main><h1>${escapeHtml(input.title)}</h1>${input.body}</main></body></html>`;
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

/** A timestamp as `YYYY-MM-DD HH:MM:SS UTC`, with the full value in the tooltip. */
export function formatTime(at: string | null): string {
  if (at === null) return "—";
  return `<time datetime="${escapeHtml(at)}" title="${escapeHtml(at)}">${escapeHtml(at.slice(0, 19).replace("T", " "))} UTC</time>`;
}
