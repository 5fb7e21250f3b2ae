import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { JOB_STATUSES, type ResponseDocumentOf, TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { encodeLogCursor } from "@kiln/storage";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Refusal } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import type { HandlerTable } from "../http/handler.js";
import { plainLogText } from "./ansi-log.js";
import { formatDuration, formatTime, statusBadge } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { binaryOfLogLine, type LiveFacts, renderLiveStatus, stepOfLogLine } from "./job-live-view.js";
import { LOG_RECORDS_PER_PAGE, type LogSearch, logLineOf, logPageCursor, renderLogView } from "./job-log-view.js";
import { JOB_PAGE_SCRIPT } from "./job-page-script.js";
import {
  renderActions,
  renderArtifacts,
  renderCaches,
  renderCrates,
  renderFailures,
  renderInjections,
  renderPhases,
  renderTests,
  renderUsage,
} from "./job-parts.js";
import { renderFlakyTests, renderTimeline } from "./job-test-parts.js";
import { JOBS_LIST_SCRIPT } from "./jobs-list-script.js";
import { dashboardPages, formKey, inUserWords, registerFormRoutes } from "./open-page.js";
import { type PersonLabel, personLabels } from "./people.js";
import { type PageContext, performAsPerson, sendBytesAsPerson } from "./perform-as-person.js";
import { performMutationAsPerson } from "./perform-mutation-as-person.js";
import { typedRepository } from "./typed-repository.js";

export { testsFailedFirst } from "./job-parts.js";

type Job = ResponseDocumentOf<"jobs.get">;
type Evidence = ResponseDocumentOf<"jobs.evidence">;
type Artifacts = ResponseDocumentOf<"jobs.artifacts">;

const FILTERS = ["repository", "branch", "status", "class"] as const;
/** Jobs per page of the list. */
const JOBS_PER_PAGE = 50;
/** Log lines read from the end of a running job's log to tell what it is doing now. */
const LIVE_TAIL_LINES = 200;

/** The filters and cursor a list URL carries, blank members dropped. */
function listQuery(raw: Record<string, unknown>): Record<string, string> {
  const query: Record<string, string> = {};
  for (const name of [...FILTERS, "cursor"]) {
    const value = raw[name];
    if (typeof value === "string" && value.trim() !== "") query[name] = value.trim();
  }
  // A repository as people type or paste it (its URL, spaces around the slash) filters as owner/name.
  if (query.repository !== undefined) query.repository = typedRepository(query.repository);
  return query;
}

/** A job id as a download's file name (ids are word characters; anything else is dropped). */
function downloadName(jobId: string): string {
  return jobId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 128) || "job";
}

function hrefWith(path: string, query: Record<string, string>): string {
  const search = new URLSearchParams(query).toString();
  return search === "" ? path : `${path}?${search}`;
}

function durationOf(job: Job): string {
  if (job.started_at === null) return "—";
  const end = job.finished_at === null ? null : Date.parse(job.finished_at);
  return end === null ? "running" : formatDuration(end - Date.parse(job.started_at));
}

/** The list's filter form, holding the filters as typed. */
function renderFilters(query: Record<string, string>): string {
  const options = ["", ...JOB_STATUSES]
    .map(
      (status) =>
        `<option value="${status}"${query.status === status ? " selected" : ""}>${status === "" ? "any" : status.replaceAll("_", " ")}</option>`,
    )
    .join("");
  const input = (name: string, label: string, placeholder: string) =>
    `<label>${label}<input name="${name}" value="${escapeHtml(query[name] ?? "")}" placeholder="${placeholder}"></label>`;
  return `<form class="filters" method="get" action="/jobs">${input("repository", "Repository", "owner/name")}${input("branch", "Branch", "main")}
<label>Status<select name="status">${options}</select></label>${input("class", "Class", "test/dev/stable")}
<button type="submit">Filter</button> <a href="/jobs">Clear</a></form>`;
}

function renderList(page: ResponseDocumentOf<"jobs.list">, query: Record<string, string>): string {
  const s = page.summary;
  const shown = s.queued + s.running + s.passed + s.failed;
  const rows = page.jobs
    .map(
      (
        job,
      ) => `<tr data-job="${escapeHtml(job.id)}" data-status="${escapeHtml(job.status)}"><td>${statusBadge(job.status)}</td>
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
  const table =
    page.jobs.length === 0
      ? `<p class="notice">No jobs${Object.keys(filters).length === 0 ? " yet. Submit one with <code>kiln cargo test</code>." : " match these filters."}</p>`
      : `<table id="jobs"><thead><tr><th>Status</th><th>Job</th><th>Repository</th><th>Branch</th><th>Class</th><th>Accepted</th><th>Duration</th></tr></thead><tbody>
${rows}</tbody></table>`;
  const summary = `<div class="summary" id="summary">
<div><strong id="count-queued">${s.queued}</strong>queued</div><div><strong id="count-running">${s.running}</strong>running</div>
<div><strong id="count-passed">${s.passed}</strong>passed</div><div><strong id="count-failed">${s.failed}</strong>failed or cancelled</div>
<div><strong>${shown}</strong>${Object.keys(filters).length === 0 ? "jobs" : `matching, of ${page.total}`}</div></div>`;
  const form = renderFilters(query);
  // #jobs-live is what the list script swaps for a fresh copy when events.stream hints at a change.
  return `<div id="jobs-live">${summary}${form}${table}${next}</div>`;
}

/** The first log line on this page that shows a failed test's output (or its FAILED line). */
function outputLineFinder(log: ResponseDocumentOf<"jobs.logs">): (name: string) => number | undefined {
  return (name) =>
    (
      log.records.find((r) => r.text.includes(`---- ${name} stdout ----`)) ??
      log.records.find((r) => r.text.includes(`test ${name} `) && r.text.includes("FAILED"))
    )?.sequence;
}

/**
 * Everything on the job page but its log, what the page script swaps for a fresh copy: `parts`
 * above the log and `details` below it. A job that has ended shows everything above its log; one
 * that has not shows its live status first, then the live log, then what else is known.
 */
function renderJobParts(
  job: Job,
  evidence: Evidence | null,
  artifacts: Artifacts | string,
  log: ResponseDocumentOf<"jobs.logs">,
  maySubmit: boolean,
  who: PersonLabel,
  live: LiveFacts | null,
): { parts: string; details: string } {
  const facts = `<dl class="facts"><dt>Status</dt><dd id="job-status" data-status="${escapeHtml(job.status)}">${statusBadge(job.status)}</dd>
<dt>Repository</dt><dd>${escapeHtml(job.repo)}</dd><dt>Branch</dt><dd>${escapeHtml(job.branch)}${job.sha_short === null ? "" : ` at <span class="mono">${escapeHtml(job.sha_short)}</span>`}</dd>
<dt>Class</dt><dd class="mono">${escapeHtml(job.class)}</dd><dt>Submitted by</dt><dd id="submitted-by">${who(job.submitted_by)}</dd>
<dt>Accepted</dt><dd>${formatTime(job.accepted_at)}</dd><dt>Started</dt><dd>${formatTime(job.started_at)}</dd>
<dt>Finished</dt><dd>${formatTime(job.finished_at)}</dd><dt>Duration</dt><dd>${durationOf(job)}</dd>
${job.retry_of === null || job.retry_of === undefined ? "" : `<dt>Retry of</dt><dd><a href="/jobs/${encodeURIComponent(job.retry_of)}">${escapeHtml(job.retry_of)}</a></dd>`}</dl>`;
  const failure =
    job.failure === null
      ? ""
      : `<div class="failure" id="failure"><strong>${escapeHtml(job.failure.cause.replaceAll("_", " "))}</strong> in phase <strong>${escapeHtml(job.failure.phase)}</strong>: ${escapeHtml(job.failure.detail)}</div>`;
  const waiting =
    job.queue_annotation === null ? "" : `<p class="notice">Waiting: ${escapeHtml(job.queue_annotation)}</p>`;
  const report = evidence?.report;
  const section = (id: string, title: string, html: string) =>
    `<section id="part-${id}"><h2>${title}</h2>${html}</section>`;
  const flaky = renderFlakyTests(report?.tests ?? [], report?.retries);
  const timeline = renderTimeline(report?.timeline ?? []);
  const sections = `${section("phases", "Phases", renderPhases(report?.phases ?? []))}
${flaky === "" ? "" : section("flaky", "Flaky tests", flaky)}
${section("tests", "Tests", renderTests(job.id, report?.tests ?? [], outputLineFinder(log)))}
${timeline === "" ? "" : section("timeline", "Build timeline", timeline)}
${section("crates", "Crates", renderCrates(report?.crates ?? []))}
${section("caches", "Caches", renderCaches(report?.caches ?? []))}
${section("injections", "Injected settings", renderInjections(report?.injections ?? []))}
${section("usage", "Usage", renderUsage(evidence?.usage ?? null))}
${section("artifacts", "Artifacts", renderArtifacts(job.id, artifacts))}`;
  const id = `<p class="mono muted">${escapeHtml(job.id)}</p>`;
  const actions = renderActions(job, maySubmit, randomUUID);
  if (live === null)
    return {
      parts: `<div id="job-parts">${id}${failure}${renderFailures(job.id, report?.failures ?? [])}${waiting}${facts}
${actions}
${sections}</div>`,
      details: "",
    };
  // Until it ends, a job's evidence is an earlier attempt's at most: shown below the log, if any.
  const earlier = (report?.phases.length ?? 0) > 0 ? sections : "";
  return {
    parts: `<div id="job-parts">${id}${renderLiveStatus(job, live)}${actions}</div>`,
    details: `<div id="job-details"><h2>Job</h2>${facts}${earlier}</div>`,
  };
}

/**
 * What a job that has not ended is doing, from its log: the step its newest lines name (read from
 * the log's tail when the page shown is not the last) and each test binary's verdict so far
 * (libtest's `test result:` lines, each after its binary's `Running …` line, found by jobs.logs_search).
 */
async function liveFactsOf(ctx: PageContext, id: string, log: ResponseDocumentOf<"jobs.logs">): Promise<LiveFacts> {
  const newest = log.watermarks.durable;
  const shownTo = log.records.at(-1)?.sequence ?? 0;
  const tail =
    newest > shownTo
      ? (
          await performAsPerson(ctx, "jobs.logs", {
            params: { id },
            query: { limit: LIVE_TAIL_LINES, cursor: encodeLogCursor(Math.max(0, newest - LIVE_TAIL_LINES)) },
          })
        ).records
      : log.records.slice(-LIVE_TAIL_LINES);
  let step: string | null = null;
  for (let i = tail.length - 1; i >= 0 && step === null; i -= 1) {
    const record = tail[i];
    if (record !== undefined) step = stepOfLogLine(record.stream, record.text);
  }
  const find = (q: string) => performAsPerson(ctx, "jobs.logs_search", { params: { id }, query: { q, limit: 500 } });
  const verdicts = (await find("test result: ")).matches;
  if (verdicts.length === 0) return { step, binaries: [] };
  const starts = [...(await find("Running ")).matches, ...(await find("Doc-tests ")).matches]
    .map((m) => ({ sequence: m.sequence, binary: binaryOfLogLine(m.stream, m.text) }))
    .filter((s) => s.binary !== null)
    .sort((a, b) => a.sequence - b.sequence);
  const binaries = verdicts.map((v) => ({
    binary: starts.filter((s) => s.sequence < v.sequence).at(-1)?.binary ?? "a test binary",
    verdict: plainLogText(v.text),
  }));
  return { step, binaries };
}

/**
 * The jobs pages, server-rendered from the same operations the API serves (jobs.list, jobs.get,
 * jobs.evidence, jobs.artifacts, jobs.logs), performed in-process as the signed-in person; the
 * job page's cancel and retry forms and artifact downloads likewise (jobs.cancel, jobs.retry,
 * jobs.artifact_bytes), since over HTTP a session cookie reaches none of those.
 */
export function registerJobPages(app: FastifyInstance, deps: AppDeps, handlers: HandlerTable): void {
  const pages = dashboardPages(deps, handlers);

  const script = (body: string) => async (_request: FastifyRequest, reply: FastifyReply) =>
    reply
      .type("text/javascript; charset=utf-8")
      .header("cache-control", "no-cache")
      .header("x-content-type-options", "nosniff")
      .send(body);
  app.get("/assets/job-page.js", script(JOB_PAGE_SCRIPT));
  app.get("/assets/jobs-list.js", script(JOBS_LIST_SCRIPT));

  app.get("/jobs", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const query = listQuery(request.query as Record<string, unknown>);
    let page: ResponseDocumentOf<"jobs.list">;
    try {
      page = await performAsPerson(ctx, "jobs.list", { query: { ...query, limit: JOBS_PER_PAGE } });
    } catch (error) {
      if (!(error instanceof Refusal) || error.code !== "invalid_request") return pages.refused(ctx, "Jobs", error);
      // A filter that cannot match as typed: the form stays as typed, saying what to change.
      const notice = `<p class="notice" id="refusal" data-code="invalid_request">${escapeHtml(inUserWords(error, ctx.person, ""))}</p>`;
      return pages.send(ctx, 400, { title: "Jobs", body: `${notice}${renderFilters(query)}` });
    }
    return pages.send(ctx, 200, { title: "Jobs", body: renderList(page, query), scripts: ["/assets/jobs-list.js"] });
  });

  app.get("/jobs/:id", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const id = (request.params as { id: string }).id;
    const query = request.query as {
      log_cursor?: unknown;
      log_line?: unknown;
      log_search?: unknown;
      log_search_cursor?: unknown;
    };
    const searched = typeof query.log_search === "string" ? query.log_search.trim() : "";
    const searchCursor =
      typeof query.log_search_cursor === "string" && query.log_search_cursor !== ""
        ? query.log_search_cursor
        : undefined;
    try {
      const job = await performAsPerson(ctx, "jobs.get", { params: { id } });
      let search: LogSearch | null = null;
      if (searched !== "")
        search = await performAsPerson(ctx, "jobs.logs_search", {
          params: { id },
          query: { q: searched, limit: 100, ...(searchCursor === undefined ? {} : { cursor: searchCursor }) },
        });
      // A search opens the page of its first hit unless the URL names a line or a page.
      const targetLine = logLineOf(query.log_line) ?? search?.matches[0]?.sequence;
      const logCursor = logPageCursor(query.log_cursor, targetLine);
      let evidence: Evidence | null = null;
      try {
        evidence = await performAsPerson(ctx, "jobs.evidence", { params: { id } });
      } catch (error) {
        // Evidence past its retention is gone; the job itself still shows.
        if (!(error instanceof Refusal)) throw error;
      }
      let artifacts: Artifacts | string;
      try {
        artifacts = await performAsPerson(ctx, "jobs.artifacts", { params: { id } });
      } catch (error) {
        // Expired artifacts (`gone`) are said so; the job still shows.
        if (!(error instanceof Refusal)) throw error;
        artifacts = error.message;
      }
      const log = await performAsPerson(ctx, "jobs.logs", {
        params: { id },
        query: { limit: LOG_RECORDS_PER_PAGE, ...(logCursor === undefined ? {} : { cursor: logCursor }) },
      });
      const maySubmit = ctx.person.scopes.includes("submit");
      const live = TERMINAL_JOB_STATUSES.has(job.status) ? null : await liveFactsOf(ctx, job.id, log);
      const who = await personLabels(ctx, [job.submitted_by]);
      const { parts, details } = renderJobParts(job, evidence, artifacts, log, maySubmit, who, live);
      return pages.send(ctx, 200, {
        title: job.description,
        status: { value: job.status, subject: `${job.description} · ${job.repo}` },
        body: `${parts}${renderLogView({
          job,
          log,
          logCursor,
          targetLine,
          search: search === null ? null : { query: searched, result: search, cursor: searchCursor },
        })}${details}`,
        bodyData: { job: job.id, terminal: String(TERMINAL_JOB_STATUSES.has(job.status)) },
        scripts: ["/assets/job-page.js"],
      });
    } catch (error) {
      return pages.refused(ctx, "Job", error);
    }
  });

  // The raw log: every stored line's text and a newline, in sequence order, read page by page
  // (jobs.logs) as the bytes go out; what a refusal stops is answered before the first byte.
  app.get("/jobs/:id/log.txt", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const id = (request.params as { id: string }).id;
    const pageAfter = (cursor: string | null) =>
      performAsPerson(ctx, "jobs.logs", {
        params: { id },
        query: { limit: LOG_RECORDS_PER_PAGE, ...(cursor === null ? {} : { cursor }) },
      });
    let first: ResponseDocumentOf<"jobs.logs">;
    try {
      first = await pageAfter(null);
    } catch (error) {
      return pages.refused(ctx, "Log", error);
    }
    async function* lines(): AsyncGenerator<Buffer> {
      let page = first;
      for (;;) {
        if (page.records.length > 0) yield Buffer.from(page.records.map((r) => `${r.text}\n`).join(""), "utf8");
        if (page.next_cursor === null || page.records.length < LOG_RECORDS_PER_PAGE) return;
        page = await pageAfter(page.next_cursor);
      }
    }
    return reply
      .type("text/plain; charset=utf-8")
      .header("content-disposition", `attachment; filename="${downloadName(id)}.log.txt"`)
      .send(Readable.from(lines()));
  });

  app.get("/jobs/:id/evidence.json", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const id = (request.params as { id: string }).id;
    try {
      const evidence = await performAsPerson(ctx, "jobs.evidence", { params: { id } });
      return reply
        .type("application/json; charset=utf-8")
        .header("content-disposition", `attachment; filename="${downloadName(id)}.evidence.json"`)
        .send(`${JSON.stringify(evidence, null, 2)}\n`);
    } catch (error) {
      return pages.refused(ctx, "Evidence", error);
    }
  });

  app.get("/jobs/:id/artifacts/:attempt/:index", async (request, reply) => {
    const ctx = await pages.open(request, reply);
    if (ctx === null) return reply;
    const params = request.params as { id: string; attempt: string; index: string };
    try {
      await sendBytesAsPerson(ctx, "jobs.artifact_bytes", {
        params: { id: params.id, attempt: Number(params.attempt), index: Number(params.index) },
      });
      return reply;
    } catch (error) {
      return pages.refused(ctx, "Artifact", error);
    }
  });

  // The cancel and retry buttons are HTML forms posting the form's idempotency key.
  registerFormRoutes(app, (scope) => {
    scope.post("/jobs/:id/cancel", async (request, reply) => {
      const id = (request.params as { id: string }).id;
      // Signed out meanwhile: back to the job's page after signing in, not to this form's target.
      const ctx = await pages.open(request, reply, `/jobs/${encodeURIComponent(id)}`);
      if (ctx === null) return reply;
      try {
        await performMutationAsPerson(ctx, "jobs.cancel", { params: { id }, idempotencyKey: formKey(request) });
        return reply.redirect(`/jobs/${encodeURIComponent(id)}`, 303);
      } catch (error) {
        return pages.refused(ctx, "Cancel job", error);
      }
    });
    scope.post("/jobs/:id/retry", async (request, reply) => {
      const id = (request.params as { id: string }).id;
      // Signed out meanwhile: back to the job's page after signing in, not to this form's target.
      const ctx = await pages.open(request, reply, `/jobs/${encodeURIComponent(id)}`);
      if (ctx === null) return reply;
      try {
        const receipt = await performMutationAsPerson(ctx, "jobs.retry", {
          params: { id },
          idempotencyKey: formKey(request),
        });
        return reply.redirect(`/jobs/${encodeURIComponent(receipt.retry)}`, 303);
      } catch (error) {
        return pages.refused(ctx, "Retry job", error);
      }
    });
  });
}
