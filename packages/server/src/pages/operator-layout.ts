import { escapeHtml } from "./html.js";

const STYLE = `*{box-sizing:border-box}body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{display:flex;align-items:center;gap:1.5rem;padding:.6rem 1.5rem;background:#4a1d1d;color:#fff}
header a{color:#fff;text-decoration:none}header nav{display:flex;gap:1rem;flex-wrap:wrap}header .brand{font-weight:700;font-size:1.1rem}
header .who{margin-left:auto;display:flex;gap:.8rem;align-items:center;font-size:.9rem;color:#ddd}
header form{margin:0}header button{font:inherit;font-size:.85rem;padding:.2rem .7rem;cursor:pointer}
main{max-width:76rem;margin:1.5rem auto;padding:0 1.5rem}h1{font-size:1.5rem;margin:.2rem 0 1rem}
h2{font-size:1.15rem;margin:1.8rem 0 .6rem}a{color:#0645ad}
table{border-collapse:collapse;width:100%;background:#fff;font-size:.92rem}
th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid #e5e5e5;vertical-align:top}
th{background:#f0f0f0;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.88em}
.status{display:inline-block;padding:.05rem .5rem;border-radius:999px;font-size:.8rem;font-weight:600;background:#e5e5e5}
.status-ok,.status-serving,.status-open,.status-running,.status-met{background:#d1f2d9;color:#135c25}
.status-refusing,.status-failed,.status-stopped,.status-flagged{background:#fbd5d5;color:#8a1111}
.status-draining,.status-drained,.status-closed,.status-gate_closed{background:#fff1c2;color:#6b4e00}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0}dl.facts dt{color:#555}dl.facts dd{margin:0}
.notice{background:#fff8e1;border:1px solid #f0dca0;padding:.6rem .8rem;border-radius:6px}
.muted{color:#666}form.inline{display:inline-flex;gap:.4rem;align-items:center;margin:0}
form.inline input{font:inherit;padding:.15rem .3rem}form.inline button{font:inherit;padding:.15rem .6rem;cursor:pointer}
ul.links{display:flex;gap:1rem;flex-wrap:wrap;padding:0;list-style:none}`;

/** The operator console's sections, each a page of its own. */
const NAVIGATION = [
  ["/operator/hosts", "Hosts"],
  ["/operator/placements", "Placements"],
  ["/operator/anomalies", "Anomalies"],
  ["/operator/audit", "Audit"],
  ["/operator/dogfood", "Dogfood"],
  ["/operator/tenants", "Tenants"],
]
  .map(([href, label]) => `<a href="${href}">${label}</a>`)
  .join("");

/**
 * An operator console page: its own header (the "Operator" mark and navigation; the tenant
 * dashboard's layout never links here, and this one never links into a tenant's pages), the
 * operator's sign-out, and the body.
 */
export function operatorPage(input: { title: string; operator: string | null; body: string }): string {
  const who =
    input.operator === null
      ? ""
      : `<div class="who"><span id="operator-principal">${escapeHtml(input.operator)}</span>
<form method="post" action="/operator/sign-out"><button type="submit" id="sign-out">Sign out</button></form></div>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(input.title)} · kiln operator</title><style>${STYLE}</style></head>
<body><header><a class="brand" id="operator-home" href="/operator">kiln · Operator</a>${input.operator === null ? "" : `<nav>${NAVIGATION}</nav>`}${who}</header>
<main><h1>${escapeHtml(input.title)}</h1>${input.body}</main></body></html>`;
}
