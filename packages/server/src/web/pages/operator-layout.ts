import { escapeHtml } from "./html.js";
import { navigationLinks, pageHead } from "./layout-script.js";
import { BASE_STYLE } from "./page-style.js";

const STYLE = `${BASE_STYLE}header{background:#4a1d1d}header .who{color:#ddd}
.status-ok,.status-serving,.status-open,.status-running,.status-met,.status-beta,.status-active{background:#d1f2d9;color:#135c25}
.status-refusing,.status-failed,.status-stopped,.status-flagged,.status-unresolved,.status-no_beta,.status-suspended{background:#fbd5d5;color:#8a1111}
.status-draining,.status-drained,.status-closed,.status-gate_closed,.status-unmet{background:#fff1c2;color:#6b4e00}
.status-off{background:#e5e5e5;color:#444}
form.inline{display:inline-flex;gap:.4rem;align-items:center;margin:0}
form.inline input{font:inherit;padding:.15rem .3rem}form.inline button{font:inherit;padding:.15rem .6rem;cursor:pointer}
ul.links{display:flex;gap:1rem;flex-wrap:wrap;padding:0;list-style:none}
@media (prefers-color-scheme:dark){.status-ok,.status-serving,.status-open,.status-running,.status-met,.status-beta,.status-active{background:#16351f;color:#8fe0a5}
.status-refusing,.status-failed,.status-stopped,.status-flagged,.status-unresolved,.status-no_beta,.status-suspended{background:#451a1a;color:#f6a6a6}
.status-draining,.status-drained,.status-closed,.status-gate_closed,.status-unmet{background:#3a3011;color:#f1d78a}.status-off{background:#33343a;color:#c4c4cc}}`;

/** The operator console's sections, each a page of its own. */
const SECTIONS = [
  ["/operator/hosts", "Hosts"],
  ["/operator/placements", "Placements"],
  ["/operator/anomalies", "Anomalies"],
  ["/operator/audit", "Audit"],
  ["/operator/dogfood", "Dogfood"],
  ["/operator/tenants", "Tenants"],
] as const;

/**
 * An operator console page: its own header (the "Operator" mark and navigation; the tenant
 * dashboard's layout never links here, and this one never links into a tenant's pages), the
 * operator's sign-out, and the body.
 */
export function operatorPage(input: { title: string; operator: string | null; body: string; path?: string }): string {
  const who =
    input.operator === null
      ? ""
      : `<div class="who"><span id="operator-principal">${escapeHtml(input.operator)}</span>
<form method="post" action="/operator/sign-out"><button type="submit" id="sign-out">Sign out</button></form></div>`;
  return `<!doctype html>
<html lang="en"><head>${pageHead(`${input.title} · kiln operator`, undefined, STYLE, [])}</head>
<body><header><a class="brand" id="operator-home" href="/operator">kiln · Operator</a>${input.operator === null ? "" : `<nav>${navigationLinks(SECTIONS, input.path)}</nav>`}${who}</header>
<main><h1>${escapeHtml(input.title)}</h1>${input.body}</main></body></html>`;
}
