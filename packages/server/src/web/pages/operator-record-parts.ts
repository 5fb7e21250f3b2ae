import type { ResponseDocumentOf } from "@kiln/contract";
import { formatTime, statusBadge } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { facts, hostLink, table, tenantLink, textOf, timeOf } from "./operator-page-parts.js";
import { formatBytes } from "./page-parts.js";

type TenantAnomalies = ResponseDocumentOf<"operator.anomalies.list">;
type PlatformAnomalies = ResponseDocumentOf<"operator.anomalies.platform.list">;
type Period = ResponseDocumentOf<"operator.dogfood.period">;
type Controls = ResponseDocumentOf<"operator.tenants.controls.get">;
type Evidence = TenantAnomalies[number]["evidence"];
type Disposition = TenantAnomalies[number]["disposition"];

function evidenceList(evidence: Evidence): string {
  if (evidence.length === 0) return "—";
  return `<ul>${evidence.map((e) => `<li><code>${escapeHtml(e.kind)}</code> ${escapeHtml(e.detail)}${e.reference === undefined ? "" : ` <span class="mono muted">${escapeHtml(e.reference)}</span>`}</li>`).join("")}</ul>`;
}

function dispositionText(d: Disposition): string {
  if (d === null) return statusBadge("undisposed");
  return `${statusBadge(d.disposition)} by <span class="mono">${escapeHtml(d.disposed_by)}</span> ${formatTime(d.disposed_at)}${d.note === null ? "" : ` — ${escapeHtml(d.note)}`}`;
}

/**
 * The disposition form of a flag (tenant or platform, by `action`): the operator's disposition and
 * a note, recorded and audited by the disposition operation; it changes nothing else.
 */
function dispositionForm(action: string, id: string): string {
  return `<form method="post" action="${escapeHtml(action)}" class="inline" data-anomaly="${escapeHtml(id)}"><select name="disposition"><option>acknowledged</option><option>confirmed</option><option>dismissed</option></select><input name="note" placeholder="note (audited)" maxlength="4000"><button type="submit">Record</button></form>`;
}

/** Tenant anomaly flags and platform anomalies, each with its evidence, disposition and its form. */
export function renderAnomalies(tenant: TenantAnomalies, platform: PlatformAnomalies): string {
  const flags = tenant.map((a) => [
    `<span class="mono">${escapeHtml(a.id)}</span>`,
    `<code>${escapeHtml(a.flag)}</code>${a.rule === undefined ? "" : `<div class="muted">${escapeHtml(a.rule)}</div>`}`,
    a.tenant === undefined ? "—" : tenantLink(a.tenant),
    textOf(a.job),
    timeOf(a.raised_at),
    evidenceList(a.evidence),
    `${dispositionText(a.disposition)}${dispositionForm(`/operator/anomalies/${encodeURIComponent(a.id)}/disposition`, a.id)}`,
  ]);
  const platformRows = platform.map((a) => [
    `<span class="mono">${escapeHtml(a.id)}</span>`,
    `<code>${escapeHtml(a.kind)}</code>`,
    a.host === undefined ? "—" : hostLink(a.host),
    timeOf(a.raised_at),
    evidenceList(a.evidence),
    a.recovery === null
      ? "—"
      : `${escapeHtml(a.recovery.kind)}${a.recovery.state === undefined ? "" : ` ${statusBadge(a.recovery.state)}`}`,
    `${dispositionText(a.disposition)}${dispositionForm(`/operator/anomalies/platform/${encodeURIComponent(a.id)}/disposition`, a.id)}`,
  ]);
  return `<h2>Tenant anomalies</h2>${table("tenant-anomalies", ["Flag", "What", "Tenant", "Job", "Raised", "Evidence", "Disposition"], flags, "No anomaly flags.")}
<h2>Platform anomalies</h2>${table("platform-anomalies", ["Anomaly", "Kind", "Host", "Raised", "Evidence", "Recovery", "Disposition"], platformRows, "No platform anomalies.")}`;
}

/** The dogfood period: state, entry gate, clock, windows, incidents, scorecard and the beta decision. */
export function renderDogfood(period: Period): string {
  const clock = period.clock;
  const gate = period.gate.conditions.map((c) => [
    escapeHtml(c.condition),
    // Unmet reads as work left (amber), never as the green of an open gate.
    statusBadge(c.met ? "met" : "unmet"),
    `<ul>${c.parts.map((p) => `<li><code>${escapeHtml(p.part)}</code> ${p.evidence === null ? `lacks: ${textOf(p.lacks)}` : `met by <span class="mono">${escapeHtml(p.evidence.reference)}</span>`}</li>`).join("")}</ul>`,
  ]);
  const windows = period.closed_windows.map((w) => [
    String(w.clock),
    timeOf(w.starts_at),
    timeOf(w.ends_at),
    w.counts ? "counts" : "does not count",
    escapeHtml(w.reasons.join(" ")),
  ]);
  const incidents = period.incidents.map((i) => [
    `<span class="mono">${escapeHtml(i.id)}</span>`,
    `<code>${escapeHtml(i.class)}</code>`,
    timeOf(i.occurred_at),
    textOf(i.detail),
    i.issue === null ? "not filed" : `#${i.issue.number}${i.issue.filed_late ? " (filed late)" : ""}`,
    i.resolution === null ? statusBadge("unresolved") : escapeHtml(i.resolution.detail),
  ]);
  const s = period.scorecard;
  const decision = period.beta_decision;
  return `${facts("dogfood-facts", [
    ["State", `<span id="dogfood-state" data-state="${escapeHtml(period.state)}">${statusBadge(period.state)}</span>`],
    ["As of", formatTime(period.as_of)],
    // Plain text: the configured dogfood tenant need not exist yet, and a link to it could be dead.
    ["Dogfood tenant", `<span class="mono">${escapeHtml(period.dogfood_tenant)}</span>`],
    ["Probe tenant", `<span class="mono">${escapeHtml(period.probe_tenant)}</span>`],
    ["Entry gate", `${statusBadge(period.gate.state)} ${timeOf(period.gate.opened_at)}`],
    [
      "Clock",
      `#${clock.number}: ${clock.counting_windows} of ${clock.required_windows} counting windows of ${clock.window_hours} h; started ${timeOf(clock.started_at)}, ends ${timeOf(clock.ends_at)}`,
    ],
    [
      "Stopped by",
      clock.stopped_by.length === 0
        ? "—"
        : clock.stopped_by.map((id) => `<span class="mono">${escapeHtml(id)}</span>`).join(", "),
    ],
    [
      "Window under observation",
      period.open_window === null
        ? "—"
        : `${timeOf(period.open_window.starts_at)} to ${timeOf(period.open_window.ends_at)}`,
    ],
    [
      "Spend this month",
      `${s.spend_cents} ¢${s.spend_ceiling_cents === null ? " (no plan recorded)" : ` of ${s.spend_ceiling_cents} ¢`}`,
    ],
    [
      "Scorecard",
      `${s.windows_counted} windows counted, ${s.windows_not_counted} not; ${s.incidents} incidents (${s.zero_tolerance_incidents} zero-tolerance, ${s.unresolved_incidents} unresolved, ${s.issues_filed_late} filed late); ${s.routine_interventions} routine interventions`,
    ],
    [
      "Beta decision",
      decision === null
        ? "not yet"
        : `${statusBadge(decision.decision)} ${formatTime(decision.at)} — ${escapeHtml(decision.reasons.join(" "))}`,
    ],
  ])}
<h2>Entry gate</h2>${table("gate", ["Condition", "", "Parts"], gate, "The gate names no conditions.")}
<h2>Closed windows</h2>${table("windows", ["Clock", "From", "To", "Counts", "Why not"], windows, "No window has closed yet.")}
<h2>Incidents</h2>${table("incidents", ["Incident", "Class", "Occurred", "Detail", "Issue", "Resolution"], incidents, "No incidents recorded.")}`;
}

/** A tenant's operator-set controls beside its consumption. */
export function renderTenantControls(c: Controls): string {
  const card = c.rate_card;
  return facts("tenant-controls", [
    ["Version", String(c.version)],
    ["Running jobs", `${c.consumption.running_jobs} of at most ${c.max_running_jobs}`],
    [
      "Storage",
      `${escapeHtml(formatBytes(c.consumption.storage_bytes))} of ${escapeHtml(formatBytes(c.storage_quota_bytes))}`,
    ],
    [
      "Transfer this month",
      `${escapeHtml(formatBytes(c.consumption.bandwidth_bytes_this_month))} of ${escapeHtml(formatBytes(c.bandwidth_bytes_per_month))}`,
    ],
    [
      "Rate card",
      card === null
        ? "none set"
        : `${card.cents_per_vcpu_second} ¢ per vCPU-second, ${card.cents_per_gib_month} ¢ per GiB-month${card.cents_per_gib_uploaded === undefined ? "" : `, ${card.cents_per_gib_uploaded} ¢ per GiB uploaded`}`,
    ],
    [
      "Suspension",
      c.suspension.suspended
        ? `${statusBadge("suspended")} since ${timeOf(c.suspension.since)}: ${textOf(c.suspension.reason)}`
        : "not suspended",
    ],
    ["Consumption observed", formatTime(c.consumption.observed_at)],
    [
      "Last change",
      c.changed_by === null
        ? "platform defaults"
        : `by <span class="mono">${escapeHtml(c.changed_by)}</span> ${timeOf(c.changed_at)}`,
    ],
  ]);
}

/**
 * The controls form: the limits as read, the suspension, and the version read (a change made
 * meanwhile is refused `conflict` and nothing is written, as over the API). Every change is
 * audited by operator.tenants.controls.set with the note given here.
 */
export function tenantControlsForm(c: Controls): string {
  const number = (name: string, label: string, value: number) =>
    `<label>${escapeHtml(label)} <input name="${name}" value="${value}" inputmode="numeric" size="16"></label>`;
  return `<form method="post" action="/operator/tenants/${escapeHtml(encodeURIComponent(c.tenant))}/controls" id="controls-form">
<input type="hidden" name="expected_version" value="${c.version}"><input type="hidden" name="was_suspended" value="${c.suspension.suspended ? "yes" : "no"}">
<p>${number("max_running_jobs", "Most running jobs", c.max_running_jobs)}</p>
<p>${number("storage_quota_bytes", "Storage quota (bytes)", c.storage_quota_bytes)}</p>
<p>${number("bandwidth_bytes_per_month", "Transfer per month (bytes)", c.bandwidth_bytes_per_month)}</p>
<p><label>Suspended <select name="suspended"><option value="no"${c.suspension.suspended ? "" : " selected"}>no</option><option value="yes"${c.suspension.suspended ? " selected" : ""}>yes</option></select></label>
<label>Reason (required to suspend) <input name="suspension_reason" maxlength="2000" size="40"></label></p>
<p><label>Note (audited) <input name="note" maxlength="4000" size="60"></label></p>
<p><button type="submit">Save controls</button></p></form>`;
}

/** The tenants, each linked to its controls, with members and suspension. */
export function renderTenantList(listed: ResponseDocumentOf<"operator.tenants.list">): string {
  const rows = listed.tenants.map((t) => [
    tenantLink(t.tenant),
    escapeHtml(t.display_name),
    String(t.members),
    t.suspended ? statusBadge("suspended") : statusBadge("active"),
    formatTime(t.created_at),
  ]);
  return `${table("tenants", ["Tenant", "Name", "Members", "State", "Created"], rows, "No tenants yet.")}${
    listed.more
      ? `<p class="muted" id="tenants-more">More tenants follow the first ${listed.tenants.length}: open one by its identifier.</p>`
      : ""
  }`;
}
