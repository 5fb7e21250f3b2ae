import type { ResponseDocumentOf } from "@kiln/contract";
import { formatTime, statusBadge } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { formatBytes } from "./page-parts.js";

type States = ResponseDocumentOf<"operator.platform.states">;
type HostView = ResponseDocumentOf<"operator.hosts.list">[number];
type HostDetail = ResponseDocumentOf<"operator.hosts.get">;
type Transitions = ResponseDocumentOf<"operator.hosts.history">;
type Recovery = ResponseDocumentOf<"operator.hosts.recovery.get">;
type Placements = ResponseDocumentOf<"operator.placements.list">;
type Audit = ResponseDocumentOf<"operator.audit.list">;

/** A record member the open records admit beyond the spec's (e.g. a host's vCPUs), read as what it is. */
export function memberOf(record: object, name: string): unknown {
  return (record as Record<string, unknown>)[name];
}

/** Any value as escaped text: absent is a dash, an object its JSON. */
export function textOf(value: unknown): string {
  if (value === null || value === undefined) return "—";
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean")
    return escapeHtml(String(value));
  return `<code>${escapeHtml(JSON.stringify(value))}</code>`;
}

/** A timestamp that may be absent. */
export const timeOf = (at: unknown): string => (typeof at === "string" ? formatTime(at) : "—");

/** Label/value pairs as a definition list; values are HTML the caller escaped. */
export function facts(id: string, rows: readonly (readonly [string, string])[]): string {
  return `<dl class="facts" id="${escapeHtml(id)}">${rows.map(([label, value]) => `<dt>${escapeHtml(label)}</dt><dd>${value}</dd>`).join("")}</dl>`;
}

/** A table, or a line saying there is nothing; cells are HTML the caller escaped. */
export function table(id: string, headings: readonly string[], rows: readonly string[][], empty: string): string {
  if (rows.length === 0) return `<p class="muted" id="${escapeHtml(id)}">${escapeHtml(empty)}</p>`;
  return `<table id="${escapeHtml(id)}"><thead><tr>${headings.map((h) => `<th>${escapeHtml(h)}</th>`).join("")}</tr></thead><tbody>
${rows.map((cells) => `<tr>${cells.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("\n")}</tbody></table>`;
}

export const hostHref = (host: string): string => `/operator/hosts/${encodeURIComponent(host)}`;
export const hostLink = (host: string): string =>
  `<a href="${escapeHtml(hostHref(host))}" class="mono">${escapeHtml(host)}</a>`;
export const tenantLink = (tenant: string): string =>
  `<a href="/operator/tenants/${escapeHtml(encodeURIComponent(tenant))}" class="mono">${escapeHtml(tenant)}</a>`;

/** Who did what to a host and when (an attribution record). */
function attribution(a: { actor: string; action: string; at: string; reason?: string } | null): string {
  if (a === null) return "—";
  return `${escapeHtml(a.action)} by <span class="mono">${escapeHtml(a.actor)}</span> ${formatTime(a.at)}${a.reason === undefined ? "" : ` — ${escapeHtml(a.reason)}`}`;
}

/**
 * The host's drain or undrain button, whichever applies to its state: a serving host drains; a
 * draining or drained one returns to placement under the revision this page read (a host that
 * moved meanwhile is refused `conflict`, as over the API), with an optional note for the audit.
 */
export function hostActions(host: string, state: string, revision: number): string {
  const base = `${hostHref(host)}`;
  if (state === "serving") {
    return `<form method="post" action="${escapeHtml(`${base}/drain`)}" class="inline"><button type="submit" data-action="drain" data-host="${escapeHtml(host)}">Drain</button></form>`;
  }
  if (state === "draining" || state === "drained") {
    return `<form method="post" action="${escapeHtml(`${base}/undrain`)}" class="inline"><input type="hidden" name="policy_revision" value="${revision}"><input name="note" placeholder="note (audited)" maxlength="4000"><button type="submit" data-action="undrain" data-host="${escapeHtml(host)}">Undrain</button></form>`;
  }
  return "";
}

/** The four operating states, each with its typed reason, and each host's capacity observation. */
export function renderPlatformStates(states: States): string {
  const rows = (
    [
      ["Management liveness", states.management_liveness],
      ["Management readiness", states.management_readiness],
      ["Execution capacity", states.execution_capacity],
      ["End-to-end workload health", states.end_to_end_workload_health],
    ] as const
  ).map(([label, s]) => [
    escapeHtml(label),
    // Canaries off: not measured — neither a green "ok" nor a failing canary.
    `<span data-state="${escapeHtml(s.state)}">${statusBadge(s.reason.code === "canaries_off" ? "off" : s.state)}</span>`,
    `<code>${escapeHtml(s.reason.code)}</code> ${escapeHtml(s.reason.detail)}`,
    timeOf(s.deadline),
    timeOf(s.computed_at),
  ]);
  return `${table("operating-states", ["State", "", "Reason", "Deadline", "Computed"], rows, "")}
<h2>Host capacity</h2>${renderCapacity(states.hosts)}`;
}

/** Each host's capacity observation: whether it admits placements, vCPUs and memory free of total. */
export function renderCapacity(hosts: States["hosts"]): string {
  const rows = hosts.map((h) => [
    hostLink(h.host),
    h.admitting ? statusBadge("open") : statusBadge("closed"),
    h.vcpus_total === undefined ? "—" : `${h.vcpus_free ?? 0} of ${h.vcpus_total}`,
    h.memory_bytes_total === undefined
      ? "—"
      : `${escapeHtml(formatBytes(h.memory_bytes_free ?? 0))} of ${escapeHtml(formatBytes(h.memory_bytes_total))}`,
    textOf(h.running_attempts),
    timeOf(h.last_seen_at),
    textOf(h.reason),
  ]);
  return table(
    "capacity",
    ["Host", "Admitting", "vCPUs free", "Memory free", "Running", "Last seen", "Why none"],
    rows,
    "No host is recorded.",
  );
}

/** The host inventory with each host's capacity beside its state, and its drain or undrain button. */
export function renderHosts(hosts: readonly HostView[], capacity: States["hosts"]): string {
  const rows = hosts.map((h) => {
    const seen = capacity.find((c) => c.host === h.host);
    return [
      hostLink(h.host),
      `<span data-host-state="${escapeHtml(h.host)}:${escapeHtml(h.state)}">${statusBadge(h.state)}</span>`,
      String(h.revision),
      seen?.vcpus_total === undefined ? "—" : `${seen.vcpus_free ?? 0} of ${seen.vcpus_total} vCPUs free`,
      textOf(memberOf(h, "running_attempts")),
      textOf(h.deployed_release),
      attribution(h.last_attribution),
      hostActions(h.host, h.state, h.revision),
    ];
  });
  return table(
    "hosts",
    ["Host", "State", "Revision", "Capacity", "Running", "Release", "Last change", ""],
    rows,
    "No host is recorded.",
  );
}

/** One host: its facts, drain attribution, blockers, receipts and its recorded transitions. */
export function renderHostDetail(detail: HostDetail, transitions: Transitions): string {
  const release = memberOf(detail, "deployed_release") as { release?: string; at?: string } | null | undefined;
  const memory = memberOf(detail, "memory_bytes");
  const revision = Number(memberOf(detail, "revision") ?? 0);
  const blockers = detail.blockers.map((b) => [
    `<code>${escapeHtml(b.kind)}</code>`,
    escapeHtml(b.detail),
    timeOf(b.since),
  ]);
  const receipts = detail.receipts.map((r) => [
    escapeHtml(r.kind),
    `<span class="mono">${escapeHtml(r.id)}</span>`,
    timeOf(r.at),
    textOf(memberOf(r, "actor")),
    textOf(memberOf(r, "summary")),
  ]);
  const history = transitions
    .filter((t) => t.host === detail.host)
    .map((t) => [
      timeOf(t.at),
      `${escapeHtml(t.from)} → ${escapeHtml(t.to)}`,
      textOf(memberOf(t, "action")),
      `<span class="mono">${escapeHtml(t.actor)}</span>`,
      textOf(memberOf(t, "revision")),
      textOf(t.reason),
    ]);
  return `${facts("host-facts", [
    [
      "State",
      `<span id="host-state" data-state="${escapeHtml(detail.serving_state)}">${statusBadge(detail.serving_state)}</span>`,
    ],
    ["Revision", String(revision)],
    ["Running attempts", textOf(memberOf(detail, "running_attempts"))],
    ["vCPUs", textOf(memberOf(detail, "vcpus"))],
    ["Memory", typeof memory === "number" ? escapeHtml(formatBytes(memory)) : "—"],
    ["Isolation", textOf(memberOf(detail, "isolation"))],
    ["Enrolled", timeOf(memberOf(detail, "enrolled_at"))],
    ["Last heartbeat", timeOf(memberOf(detail, "last_heartbeat_at"))],
    ["Deployed release", release == null ? "—" : `${textOf(release.release)} ${timeOf(release.at)}`],
    ["Drained by", attribution(detail.drain_attribution)],
  ])}
<div class="actions">${hostActions(detail.host, detail.serving_state, revision)}</div>
<ul class="links"><li><a id="recovery-link" href="${escapeHtml(`${hostHref(detail.host)}/recovery`)}">Recovery, admission and incident</a></li></ul>
<h2>Blockers</h2>${table("blockers", ["Kind", "Detail", "Since"], blockers, "Nothing keeps this host from serving.")}
<h2>Receipts</h2>${table("receipts", ["Kind", "Receipt", "At", "Actor", "Summary"], receipts, "No receipts recorded.")}
<h2>History</h2>${table("history", ["At", "Transition", "Action", "Actor", "Revision", "Reason"], history, "No transitions recorded.")}`;
}

/** A host's recovery read: admission, the host operation, policy, open incident, newest recovery, invocations. */
export function renderRecovery(recovery: Recovery): string {
  const a = recovery.admission;
  const steps = (recovery.recovery?.steps ?? []).map((s) => [
    escapeHtml(s.step),
    statusBadge(s.state),
    s.destructive ? "destructive" : "",
    timeOf(s.started_at),
    timeOf(s.finished_at),
    textOf(s.detail),
  ]);
  const invocations = recovery.invocations.map((i) => [
    timeOf(i.at),
    `<span class="mono">${escapeHtml(i.operation)}</span>`,
    `<span class="mono">${escapeHtml(i.operator)}</span>`,
    escapeHtml(i.surface),
    textOf(i.incident),
  ]);
  return `${facts("recovery-facts", [
    [
      "Admission",
      a.open
        ? statusBadge("open")
        : `${statusBadge("closed")} by ${textOf(a.closed_by)} ${timeOf(a.closed_at)} ${textOf(a.closure_reason)}`,
    ],
    [
      "Host operation",
      recovery.host_operation === null
        ? "none"
        : `${escapeHtml(recovery.host_operation.operation)} held by ${textOf(recovery.host_operation.holder)} (revision ${recovery.host_operation.revision})`,
    ],
    [
      "Policy",
      recovery.policy === null
        ? "none set"
        : `${recovery.policy.automatic ? "automatic" : "manual"} (revision ${recovery.policy.revision})`,
    ],
    [
      "Open incident",
      recovery.incident === null
        ? "none"
        : `${escapeHtml(recovery.incident.id)}${recovery.incident.awaiting_operator ? ` — awaits an operator: ${textOf(recovery.incident.awaiting_reason)}` : ""}`,
    ],
    [
      "Recovery",
      recovery.recovery === null
        ? "none"
        : `${escapeHtml(recovery.recovery.operation)} ${statusBadge(recovery.recovery.state)} by ${escapeHtml(recovery.recovery.began_by)} ${timeOf(recovery.recovery.began_at)}`,
    ],
  ])}
<h2>Step ledger</h2>${table("recovery-steps", ["Step", "State", "", "Started", "Finished", "Detail"], steps, "No recovery recorded.")}
<h2>Invocations</h2>${table("invocations", ["At", "Operation", "Operator", "Surface", "Incident"], invocations, "No invocations recorded.")}`;
}

/** Live placements, flagged first (as the operation orders them). */
export function renderPlacements(placements: Placements): string {
  const rows = placements.map((p) => [
    `<span class="mono">${escapeHtml(p.job_id)}</span>`,
    `<span class="mono">${escapeHtml(p.vm_id)}</span>`,
    hostLink(p.host),
    p.tenant === undefined ? "—" : tenantLink(p.tenant),
    statusBadge(p.state),
    p.flagged ? `${statusBadge("flagged")} ${textOf(p.flag_reason)}` : "",
    timeOf(p.placed_at),
  ]);
  return table(
    "placements",
    ["Job", "VM", "Host", "Tenant", "State", "Flag", "Placed"],
    rows,
    "No live placements: no attempt runs on any host now.",
  );
}

/** One page of the operator audit (newest first), with links to its neighbours. */
export function renderAudit(entries: Audit, page: number, perPage: number): string {
  const pages = Math.max(1, Math.ceil(entries.length / perPage));
  const shown = entries.slice((page - 1) * perPage, page * perPage);
  const rows = shown.map((e) => [
    `<span class="num">${e.sequence}</span>`,
    timeOf(e.at),
    `<span class="mono">${escapeHtml(e.actor)}</span>`,
    `<code>${escapeHtml(e.operation)}</code>`,
    `<span class="mono">${escapeHtml(e.target)}</span>`,
    textOf(e.outcome),
    textOf(e.value),
  ]);
  const link = (n: number, label: string, id: string) => `<a id="${id}" href="/operator/audit?page=${n}">${label}</a>`;
  const nav = `<p class="actions">${page > 1 ? link(page - 1, "← Newer", "audit-newer") : ""} <span class="muted">page ${page} of ${pages}</span> ${page < pages ? link(page + 1, "Older →", "audit-older") : ""}</p>`;
  return `${table("audit", ["#", "At", "Actor", "Operation", "Target", "Outcome", "Value"], rows, "The operator audit is empty.")}
${nav}<p class="muted">The newest thousand entries are paged here; <a id="audit-export" href="/operator/api/audit/export">the export</a> holds every entry.</p>`;
}
