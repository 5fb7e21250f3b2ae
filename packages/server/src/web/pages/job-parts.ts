import { type ResponseDocumentOf, TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { formatDuration, formatTime, statusBadge } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";

type Job = ResponseDocumentOf<"jobs.get">;
type Evidence = ResponseDocumentOf<"jobs.evidence">;
type Report = Evidence["report"];
type TestRow = Report["tests"][number];
type Artifacts = ResponseDocumentOf<"jobs.artifacts">;

const OUTCOME_ORDER: Record<TestRow["outcome"], number> = { failed: 0, passed: 1, ignored: 2 };

/** Failed tests first, then by binary and name. */
export function testsFailedFirst(tests: readonly TestRow[]): TestRow[] {
  return [...tests].sort(
    (a, b) =>
      OUTCOME_ORDER[a.outcome] - OUTCOME_ORDER[b.outcome] ||
      a.target.localeCompare(b.target) ||
      a.name.localeCompare(b.name) ||
      a.attempt - b.attempt,
  );
}

function bytes(n: number | null): string {
  if (n === null) return "—";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * Phases as a timeline: one row per phase, its bar placed and sized by its start and duration
 * within its attempt (inline `style` attributes are allowed by the page policy; script is not).
 */
export function renderPhases(phases: Report["phases"]): string {
  if (phases.length === 0) return `<p class="muted">No phases reported yet.</p>`;
  const spans = new Map<number, { start: number; end: number }>();
  for (const p of phases) {
    if (p.started_at === null) continue;
    const start = Date.parse(p.started_at);
    const end = start + (p.duration_ms ?? 0);
    const span = spans.get(p.attempt);
    spans.set(
      p.attempt,
      span === undefined ? { start, end } : { start: Math.min(span.start, start), end: Math.max(span.end, end) },
    );
  }
  const rows = phases.map((p) => {
    const span = spans.get(p.attempt);
    let bar = "";
    if (span !== undefined && p.started_at !== null) {
      const total = Math.max(span.end - span.start, 1);
      const left = ((Date.parse(p.started_at) - span.start) / total) * 100;
      const width = Math.max(((p.duration_ms ?? 0) / total) * 100, 0.5);
      bar = `<div class="bar bar-${escapeHtml(p.status)}" style="margin-left:${left.toFixed(2)}%;width:${Math.min(width, 100 - left).toFixed(2)}%"></div>`;
    }
    return `<tr data-phase="${escapeHtml(p.name)}"><td class="num">${p.attempt}</td><td>${escapeHtml(p.name)}</td><td>${statusBadge(p.status)}</td><td class="timeline">${bar}</td><td class="num">${formatDuration(p.duration_ms)}</td></tr>`;
  });
  return `<table id="phases"><thead><tr><th>Attempt</th><th>Phase</th><th>Status</th><th class="timeline">Timeline</th><th>Duration</th></tr></thead><tbody>
${rows.join("\n")}</tbody></table>`;
}

/**
 * The tests table, failed first, per binary, with durations; the outcome filter and search box
 * work through the page script (rows carry their outcome and lowercased search text). A failed
 * test links to its output in the log: the line `lineOf` finds on the rendered page, else the
 * script searches the log as it then stands.
 */
export function renderTests(tests: readonly TestRow[], lineOf: (name: string) => number | undefined): string {
  if (tests.length === 0) return `<p class="muted">No test results.</p>`;
  const sorted = testsFailedFirst(tests);
  const count = (outcome: TestRow["outcome"]) => sorted.filter((t) => t.outcome === outcome).length;
  const rows = sorted.map((t) => {
    const line = t.outcome === "failed" ? lineOf(t.name) : undefined;
    const output =
      t.outcome === "failed"
        ? ` <a class="test-output" data-test="${escapeHtml(t.name)}" href="#${line === undefined ? "log" : `L${line}`}">output</a>`
        : "";
    return `<tr class="test-${t.outcome}" data-outcome="${t.outcome}" data-search="${escapeHtml(`${t.target} ${t.name}`.toLowerCase())}"><td>${statusBadge(t.outcome)}</td><td class="mono">${escapeHtml(t.target)}</td><td class="mono">${escapeHtml(t.name)}${output}</td><td class="num">${t.attempt}</td><td class="num">${formatDuration(t.duration_ms)}</td></tr>`;
  });
  return `<p id="tests-summary">${count("failed")} failed · ${count("passed")} passed · ${count("ignored")} ignored</p>
<div class="filters"><label>Outcome <select id="tests-outcome"><option value="">any</option><option value="failed">failed</option><option value="passed">passed</option><option value="ignored">ignored</option></select></label>
<label>Search <input id="tests-search" type="search" placeholder="binary or test name"></label> <span class="muted"><span id="tests-shown">${sorted.length}</span> shown</span></div>
<table id="tests"><thead><tr><th>Outcome</th><th>Binary</th><th>Test</th><th>Attempt</th><th>Duration</th></tr></thead><tbody>
${rows.join("\n")}</tbody></table>`;
}

/** Crates: how many were fresh (reused from the lineage) and which were rebuilt. */
export function renderCrates(crates: Report["crates"]): string {
  if (crates.length === 0) return `<p class="muted">No crates reported.</p>`;
  const fresh = crates.filter((c) => c.outcome === "fresh").length;
  const order = { failed: 0, compiled: 1, fresh: 2 } as const;
  const rows = [...crates]
    .sort((a, b) => order[a.outcome] - order[b.outcome] || a.name.localeCompare(b.name))
    .map(
      (c) =>
        `<tr class="crate-${c.outcome}"><td class="mono">${escapeHtml(c.name)} ${escapeHtml(c.version)}</td><td>${escapeHtml(c.source)}</td><td>${c.outcome === "compiled" ? "rebuilt" : escapeHtml(c.outcome)}</td><td class="num">${formatDuration(c.duration_ms)}</td></tr>`,
    );
  return `<p id="crates-summary">${fresh} fresh · ${crates.length - fresh} rebuilt or failed</p>
<table id="crates"><thead><tr><th>Crate</th><th>Source</th><th>Outcome</th><th>Duration</th></tr></thead><tbody>
${rows.join("\n")}</tbody></table>`;
}

/** Caches: warm or cold, and why cold. */
export function renderCaches(caches: Report["caches"]): string {
  if (caches.length === 0) return `<p class="muted">No cache restored or saved.</p>`;
  return `<table id="caches"><thead><tr><th>Lineage</th><th>Class</th><th>Cache</th><th>Why</th><th>Restored</th><th>Saved</th></tr></thead><tbody>
${caches
  .map(
    (c) =>
      `<tr><td class="mono">${escapeHtml(c.lineage)}</td><td class="mono">${escapeHtml(c.class)}</td><td>${statusBadge(c.outcome)}</td><td>${escapeHtml(c.reason ?? (c.outcome === "warm" ? "restored from the lineage" : "—"))}</td><td class="num">${bytes(c.restored_bytes)}</td><td class="num">${bytes(c.saved_bytes)}</td></tr>`,
  )
  .join("\n")}</tbody></table>`;
}

/** Injected build settings, applied or not (and why not). */
export function renderInjections(injections: Report["injections"]): string {
  if (injections.length === 0) return `<p class="muted">No settings injected.</p>`;
  return `<table id="injections"><thead><tr><th>Setting</th><th>Value</th><th>Origin</th><th>Status</th><th>Detail</th></tr></thead><tbody>
${injections
  .map(
    (i) =>
      `<tr><td class="mono">${escapeHtml(i.setting)}</td><td class="mono">${escapeHtml(i.value)}</td><td>${escapeHtml(i.origin)}</td><td>${statusBadge(i.status)}</td><td>${escapeHtml(i.detail)}</td></tr>`,
  )
  .join("\n")}</tbody></table>`;
}

/** Metered usage once metering closed. */
export function renderUsage(usage: Evidence["usage"]): string {
  if (usage === null) return `<p class="muted" id="usage">No usage metered yet.</p>`;
  return `<dl class="facts" id="usage"><dt>Size</dt><dd class="mono">${escapeHtml(String(usage.size))}</dd><dt>Metered</dt><dd>${usage.seconds} s</dd>
<dt>vCPU-seconds</dt><dd>${usage.vcpu_seconds}</dd><dt>Closed</dt><dd>${formatTime(usage.closed_at)}</dd></dl>`;
}

/** The job's published artifacts, each a download through the page's artifact route. */
export function renderArtifacts(jobId: string, artifacts: Artifacts | string): string {
  if (typeof artifacts === "string") return `<p class="muted" id="artifacts">${escapeHtml(artifacts)}</p>`;
  if (artifacts.publications.length === 0) return `<p class="muted" id="artifacts">No artifacts published.</p>`;
  const rows = artifacts.publications.flatMap((p) =>
    p.files.map(
      (f) =>
        `<tr><td class="num">${p.attempt}</td><td class="mono"><a href="/jobs/${encodeURIComponent(jobId)}/artifacts/${p.attempt}/${f.index}" download>${escapeHtml(f.path)}</a></td><td class="num">${bytes(f.bytes)}</td><td class="mono muted">${escapeHtml(f.sha256.slice(0, 16))}…</td></tr>`,
    ),
  );
  return `<p class="muted">Kept until ${formatTime(artifacts.expires_at)}.</p>
<table id="artifacts"><thead><tr><th>Attempt</th><th>File</th><th>Size</th><th>SHA-256</th></tr></thead><tbody>
${rows.join("\n")}</tbody></table>`;
}

/**
 * Cancel (while the job runs or waits) and retry (once it is terminal), for a person whose role
 * may submit: plain forms posting to the page's own routes, each with a fresh idempotency key
 * so a double-submit performs once.
 */
export function renderActions(job: Job, maySubmit: boolean, newKey: () => string): string {
  if (!maySubmit) return "";
  const id = encodeURIComponent(job.id);
  const form = (action: string, label: string) =>
    `<form method="post" action="/jobs/${id}/${action}"><input type="hidden" name="idempotency_key" value="${escapeHtml(newKey())}"><button type="submit" id="${action}">${label}</button></form>`;
  if (job.status === "queued" || job.status === "running")
    return `<div class="actions">${form("cancel", "Cancel job")}</div>`;
  if (TERMINAL_JOB_STATUSES.has(job.status)) return `<div class="actions">${form("retry", "Retry job")}</div>`;
  return "";
}
