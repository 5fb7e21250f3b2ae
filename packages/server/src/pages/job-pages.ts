import { JOB_STATUSES, type ResponseDocumentOf } from "@kiln/contract";
import { findTenant } from "@kiln/storage";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Principal } from "../auth/principal.js";
import type { AppDeps } from "../deps.js";
import type { HandlerTable } from "../handlers/handler.js";
import { Refusal } from "../http/refusal.js";
import { dashboardPage, formatDuration, formatTime, statusBadge } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { sendPage, signedIn } from "./page-response.js";
import { type PageContext, performAsPerson } from "./perform-as-person.js";

type Job = ResponseDocumentOf<"jobs.get">;
type Evidence = ResponseDocumentOf<"jobs.evidence">;
type TestRow = Evidence["report"]["tests"][number];

const FILTERS = ["repository", "branch", "status", "class"] as const;
/** Jobs per page of the list, log records per page of the job page. */
const JOBS_PER_PAGE = 50;
const LOG_RECORDS_PER_PAGE = 1000;

/** The filters and cursor a list URL carries, blank members dropped. */
function listQuery(raw: Record<string, unknown>): Record<string, string> {
  const query: Record<string, string> = {};
  for (const name of [...FILTERS, "cursor"]) {
    const value = raw[name];
    if (typeof value === "string" && value.trim() !== "") query[name] = value.trim();
  }
  return query;
}

function hrefWith(path: string, query: Record<string, string>): string {
  const search = new URLSearchParams(query).toString();
  return search === "" ? path : `${path}?${search}`;
}

/** Colour codes are dropped for now (rendering them is the log viewer's follow-up). */
function withoutAnsi(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC
  return text.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "");
}

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

function durationOf(job: Job): string {
  if (job.started_at === null) return "—";
  const end = job.finished_at === null ? null : Date.parse(job.finished_at);
  return end === null ? "running" : formatDuration(end - Date.parse(job.started_at));
}

function renderList(page: ResponseDocumentOf<"jobs.list">, query: Record<string, string>): string {
  const s = page.summary;
  const shown = s.queued + s.running + s.passed + s.failed;
  const options = ["", ...JOB_STATUSES]
    .map(
      (status) =>
        `<option value="${status}"${query.status === status ? " selected" : ""}>${status === "" ? "any" : status.replaceAll("_", " ")}</option>`,
    )
    .join("");
  const input = (name: string, label: string, placeholder: string) =>
    `<label>${label}<input name="${name}" value="${escapeHtml(query[name] ?? "")}" placeholder="${placeholder}"></label>`;
  const rows = page.jobs
    .map(
      (job) => `<tr data-job="${escapeHtml(job.id)}"><td>${statusBadge(job.status)}</td>
<td><a href="/jobs/${encodeURIComponent(job.id)}">${escapeHtml(job.description)}</a><div class="muted mono">${escapeHtml(job.id)}</div></td>
<td>${escapeHtml(job.repo)}</td><td>${escapeHtml(job.branch)}${job.sha_short === null ? "" : ` <span class="mono muted">${escapeHtml(job.sha_short)}</span>`}</td>
<td class="mono">${escapeHtml(job.class)}</td><td>${formatTime(job.accepted_at)}</td><td class="num">${durationOf(job)}</td></tr>`,
    )
    .join("\n");
  const { cursor: _cursor, ...filters } = query;
  const next =
    page.next_cursor === null
      ? ""
      : `<p><a id="older" href="${escapeHtml(hrefWith("/jobs", { ...filters, cursor: page.next_cursor }))}">Older jobs →</a></p>`;
  return `<div class="summary" id="summary">
<div><strong id="count-queued">${s.queued}</strong>queued</div><div><strong id="count-running">${s.running}</strong>running</div>
<div><strong id="count-passed">${s.passed}</strong>passed</div><div><strong id="count-failed">${s.failed}</strong>failed or cancelled</div>
<div><strong>${shown}</strong>${Object.keys(filters).length === 0 ? "jobs" : `matching, of ${page.total}`}</div></div>
<form class="filters" method="get" action="/jobs">${input("repository", "Repository", "owner/name")}${input("branch", "Branch", "main")}
<label>Status<select name="status">${options}</select></label>${input("class", "Class", "test:stable:kiln2-cpu")}
<button type="submit">Filter</button> <a href="/jobs">Clear</a></form>
${
  page.jobs.length === 0
    ? `<p class="notice">No jobs${Object.keys(filters).length === 0 ? " yet. Submit one with <code>kiln cargo test</code>." : " match these filters."}</p>`
    : `<table id="jobs"><thead><tr><th>Status</th><th>Job</th><th>Repository</th><th>Branch</th><th>Class</th><th>Accepted</th><th>Duration</th></tr></thead><tbody>
${rows}</tbody></table>`
}${next}`;
}

function renderJob(
  job: Job,
  evidence: Evidence | null,
  log: ResponseDocumentOf<"jobs.logs">,
  logCursor: string | undefined,
): string {
  const facts = `<dl class="facts"><dt>Status</dt><dd id="job-status">${statusBadge(job.status)}</dd>
<dt>Repository</dt><dd>${escapeHtml(job.repo)}</dd><dt>Branch</dt><dd>${escapeHtml(job.branch)}${job.sha_short === null ? "" : ` at <span class="mono">${escapeHtml(job.sha_short)}</span>`}</dd>
<dt>Class</dt><dd class="mono">${escapeHtml(job.class)}</dd><dt>Submitted by</dt><dd>${escapeHtml(job.submitted_by)}</dd>
<dt>Accepted</dt><dd>${formatTime(job.accepted_at)}</dd><dt>Started</dt><dd>${formatTime(job.started_at)}</dd>
<dt>Finished</dt><dd>${formatTime(job.finished_at)}</dd><dt>Duration</dt><dd>${durationOf(job)}</dd>
${job.retry_of === null || job.retry_of === undefined ? "" : `<dt>Retry of</dt><dd><a href="/jobs/${encodeURIComponent(job.retry_of)}">${escapeHtml(job.retry_of)}</a></dd>`}</dl>`;
  const failure =
    job.failure === null
      ? ""
      : `<div class="failure" id="failure"><strong>${escapeHtml(job.failure.cause.replaceAll("_", " "))}</strong> in phase <strong>${escapeHtml(job.failure.phase)}</strong>: ${escapeHtml(job.failure.detail)}</div>`;
  const waiting =
    job.queue_annotation === null ? "" : `<p class="notice">Waiting: ${escapeHtml(job.queue_annotation)}</p>`;

  const phases =
    evidence === null || evidence.report.phases.length === 0
      ? `<p class="muted">No phases reported yet.</p>`
      : `<table id="phases"><thead><tr><th>Attempt</th><th>Phase</th><th>Status</th><th>Started</th><th>Duration</th></tr></thead><tbody>
${evidence.report.phases
  .map(
    (p) =>
      `<tr><td class="num">${p.attempt}</td><td>${escapeHtml(p.name)}</td><td>${statusBadge(p.status)}</td><td>${formatTime(p.started_at)}</td><td class="num">${formatDuration(p.duration_ms)}</td></tr>`,
  )
  .join("\n")}</tbody></table>`;

  const tests = evidence === null ? [] : testsFailedFirst(evidence.report.tests);
  const count = (outcome: TestRow["outcome"]) => tests.filter((t) => t.outcome === outcome).length;
  const testsHtml =
    tests.length === 0
      ? `<p class="muted">No test results.</p>`
      : `<p id="tests-summary">${count("failed")} failed · ${count("passed")} passed · ${count("ignored")} ignored</p>
<table id="tests"><thead><tr><th>Outcome</th><th>Binary</th><th>Test</th><th>Attempt</th><th>Duration</th></tr></thead><tbody>
${tests
  .map(
    (t) =>
      `<tr class="test-${t.outcome}"><td>${statusBadge(t.outcome)}</td><td class="mono">${escapeHtml(t.target)}</td><td class="mono">${escapeHtml(t.name)}</td><td class="num">${t.attempt}</td><td class="num">${formatDuration(t.duration_ms)}</td></tr>`,
  )
  .join("\n")}</tbody></table>`;

  const lines = log.records
    .map(
      (r) =>
        `<span class="${r.stream}"><span class="seq">${String(r.sequence).padStart(5, " ")} </span>${escapeHtml(withoutAnsi(r.text))}</span>`,
    )
    .join("\n");
  const more =
    log.next_cursor === null
      ? ""
      : `<p><a id="log-more" href="/jobs/${encodeURIComponent(job.id)}?log_cursor=${encodeURIComponent(log.next_cursor)}#log">Next ${LOG_RECORDS_PER_PAGE} lines →</a></p>`;
  const logHtml =
    log.records.length === 0
      ? `<p class="muted">${logCursor === undefined ? "No log lines yet." : "No more log lines."}</p>`
      : `<pre class="log" id="log-lines">${lines}</pre>${more}`;

  return `<p class="mono muted">${escapeHtml(job.id)}</p>${failure}${waiting}${facts}
<h2>Phases</h2>${phases}<h2>Tests</h2>${testsHtml}<h2 id="log">Log</h2>${logHtml}`;
}

/**
 * The jobs pages, server-rendered from the same operations the API serves (jobs.list, jobs.get,
 * jobs.evidence, jobs.logs), performed in-process as the signed-in person.
 */
export function registerJobPages(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  async function pageContext(request: FastifyRequest, reply: FastifyReply): Promise<PageContext | null> {
    const person = await signedIn(deps, request);
    if (person === null) {
      await reply.redirect(`/?next=${encodeURIComponent(request.url)}`, 303);
      return null;
    }
    return { deps, handlers, person, request, reply };
  }

  async function tenantName(person: Principal): Promise<string> {
    return (await findTenant(deps.storage, person.tenantId))?.displayName ?? person.tenantId;
  }

  async function refused(ctx: PageContext, title: string, error: unknown) {
    if (!(error instanceof Refusal)) throw error;
    const status = error.code === "not_found" ? 404 : error.code === "role_required" ? 403 : 400;
    return sendPage(
      ctx.reply,
      status,
      dashboardPage({
        title,
        person: ctx.person,
        tenantName: await tenantName(ctx.person),
        body: `<p class="notice" id="refusal">${escapeHtml(error.message)}</p><p><a href="/jobs">All jobs</a></p>`,
      }),
    );
  }

  app.get("/jobs", async (request, reply) => {
    const ctx = await pageContext(request, reply);
    if (ctx === null) return reply;
    const query = listQuery(request.query as Record<string, unknown>);
    let page: ResponseDocumentOf<"jobs.list">;
    try {
      page = await performAsPerson(ctx, "jobs.list", { query: { ...query, limit: JOBS_PER_PAGE } });
    } catch (error) {
      return refused(ctx, "Jobs", error);
    }
    return sendPage(
      reply,
      200,
      dashboardPage({
        title: "Jobs",
        person: ctx.person,
        tenantName: await tenantName(ctx.person),
        body: renderList(page, query),
      }),
    );
  });

  app.get("/jobs/:id", async (request, reply) => {
    const ctx = await pageContext(request, reply);
    if (ctx === null) return reply;
    const id = (request.params as { id: string }).id;
    const raw = (request.query as { log_cursor?: unknown }).log_cursor;
    const logCursor = typeof raw === "string" && raw !== "" ? raw : undefined;
    try {
      const job = await performAsPerson(ctx, "jobs.get", { params: { id } });
      let evidence: Evidence | null = null;
      try {
        evidence = await performAsPerson(ctx, "jobs.evidence", { params: { id } });
      } catch (error) {
        // Evidence past its retention is gone; the job itself still shows.
        if (!(error instanceof Refusal)) throw error;
      }
      const log = await performAsPerson(ctx, "jobs.logs", {
        params: { id },
        query: { limit: LOG_RECORDS_PER_PAGE, ...(logCursor === undefined ? {} : { cursor: logCursor }) },
      });
      return sendPage(
        reply,
        200,
        dashboardPage({
          title: job.description,
          person: ctx.person,
          tenantName: await tenantName(ctx.person),
          body: renderJob(job, evidence, log, logCursor),
        }),
      );
    } catch (error) {
      return refused(ctx, "Job", error);
    }
  });
}
