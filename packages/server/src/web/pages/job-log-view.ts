import { type ResponseDocumentOf, TERMINAL_JOB_STATUSES } from "@kiln/contract";
import { encodeLogCursor } from "@kiln/storage";
import { ansiToHtml, isErrorLine, plainLogText } from "./ansi-log.js";
import { escapeHtml } from "./html.js";
import { logLineHref } from "./job-parts.js";

type Job = ResponseDocumentOf<"jobs.get">;
type LogPage = ResponseDocumentOf<"jobs.logs">;
type LogRecord = LogPage["records"][number];
export type LogSearch = ResponseDocumentOf<"jobs.logs_search">;

/** Log records per page of the job page. */
export const LOG_RECORDS_PER_PAGE = 1000;

/** Where the job page's log view is: its page, the line asked for, and the search, if any. */
export interface LogViewState {
  readonly job: Job;
  readonly log: LogPage;
  /** The cursor the page was read from (undefined: the first page). */
  readonly logCursor: string | undefined;
  /** The line the URL names (`log_line`), opened and highlighted wherever it is folded. */
  readonly targetLine: number | undefined;
  readonly search: { readonly query: string; readonly result: LogSearch; readonly cursor: string | undefined } | null;
}

/**
 * The log page the job page shows: `log_cursor` (a page's own link), or the page holding
 * `log_line` (a failure's, a search hit's or a line number's link names its sequence; pages of
 * LOG_RECORDS_PER_PAGE lines from the start), else the first.
 */
export function logPageCursor(cursor: unknown, line: number | undefined): string | undefined {
  if (typeof cursor === "string" && cursor !== "") return cursor;
  const sequence = line ?? 0;
  if (sequence <= LOG_RECORDS_PER_PAGE) return undefined;
  return encodeLogCursor(Math.floor((sequence - 1) / LOG_RECORDS_PER_PAGE) * LOG_RECORDS_PER_PAGE);
}

/** A `log_line` query value as a sequence, if it is one. */
export function logLineOf(value: unknown): number | undefined {
  return typeof value === "string" && /^\d{1,15}$/.test(value) && Number(value) > 0 ? Number(value) : undefined;
}

/** A run of the log shown as one unit: plain lines, kiln's own lines, or one test binary's section. */
type LogBlock =
  | { readonly kind: "lines"; readonly records: LogRecord[] }
  | { readonly kind: "kiln"; readonly records: LogRecord[] }
  | { readonly kind: "binary"; readonly records: LogRecord[] };

const BINARY_START = /^\s*(Running|Doc-tests) \S/;
/** Cargo's own verdict after its test binaries (`error: test failed, to rerun pass …`). */
const CARGO_TEST_VERDICT = /^error: (test failed|\d+ targets? failed)/;

/**
 * The page's records as blocks: each run of two or more of kiln's own lines (the preamble, the
 * sandbox detail at the end) and each test binary's section (cargo's `Running …` or `Doc-tests …`
 * line up to the next, kiln's next line or cargo's verdict) fold; everything else is plain.
 */
export function logBlocks(records: readonly LogRecord[]): LogBlock[] {
  const blocks: LogBlock[] = [];
  const start = (kind: LogBlock["kind"], record: LogRecord) => blocks.push({ kind, records: [record] });
  for (const record of records) {
    const plain = plainLogText(record.text);
    const block = blocks.at(-1);
    if (record.stream === "system") {
      if (block?.kind === "kiln") block.records.push(record);
      else start("kiln", record);
    } else if (record.stream === "stderr" && BINARY_START.test(plain)) {
      start("binary", record);
    } else if (
      block === undefined ||
      block.kind === "kiln" ||
      (block.kind === "binary" && CARGO_TEST_VERDICT.test(plain))
    ) {
      start("lines", record);
    } else {
      block.records.push(record);
    }
  }
  // A lone line of kiln's is not worth a fold: it joins the plain lines around it.
  const merged: LogBlock[] = [];
  for (const b of blocks) {
    const block: LogBlock = b.kind === "kiln" && b.records.length < 2 ? { kind: "lines", records: b.records } : b;
    const last = merged.at(-1);
    if (block.kind === "lines" && last?.kind === "lines") last.records.push(...block.records);
    else merged.push(block);
  }
  return merged;
}

/**
 * One log line: its number a link to itself (`#L<sequence>`: the address of this page holds it;
 * the page script makes the address `?log_line=<sequence>#L<sequence>`, which opens its page from
 * anywhere), its time (shown by the toggle), its text coloured.
 */
export function renderLogLine(record: LogRecord, needle: string | null): string {
  const hit = needle !== null && plainLogText(record.text).toLowerCase().includes(needle.toLowerCase());
  return `<span class="line ${record.stream}${hit ? " hit" : ""}" id="L${record.sequence}"><a class="seq" href="#L${record.sequence}">${String(record.sequence).padStart(5, " ")} </a><time class="ts" datetime="${escapeHtml(record.at)}">${escapeHtml(record.at.slice(11, 23))} </time>${ansiToHtml(record.text, hit ? needle : null)}</span>`;
}

function renderBlocks(state: LogViewState, needle: string | null): string {
  const line = (r: LogRecord) => renderLogLine(r, needle);
  return logBlocks(state.log.records)
    .map((block) => {
      if (block.kind === "lines") return block.records.map(line).join("");
      const holdsTarget = block.records.some(
        (r) =>
          r.sequence === state.targetLine ||
          (needle !== null && plainLogText(r.text).toLowerCase().includes(needle.toLowerCase())),
      );
      if (block.kind === "kiln") {
        const open = holdsTarget ? " open" : "";
        return `<details class="fold fold-kiln"${open}><summary><span class="fold-title">kiln · ${block.records.length} lines of the service's own</span></summary>${block.records.map(line).join("")}</details>`;
      }
      // A test binary's section folds once libtest said `ok` on this page and nothing in it failed;
      // one that failed, holds the line asked for, or goes on past this page stays open.
      const [head, ...rest] = block.records;
      const failed = block.records.some((r) => isErrorLine(r.text));
      const verdict = block.records.map((r) => plainLogText(r.text)).find((t) => t.startsWith("test result: "));
      const open = failed || holdsTarget || !verdict?.startsWith("test result: ok") ? " open" : "";
      return `<details class="fold fold-binary${failed ? " fold-failed" : ""}"${open}><summary>${head === undefined ? "" : line(head)}${verdict === undefined ? "" : `<span class="fold-verdict">${escapeHtml(verdict)}</span>`}</summary>${rest.map(line).join("")}</details>`;
    })
    .join("");
}

function renderSearch(state: LogViewState): string {
  const search = state.search;
  if (search === null) return "";
  const jobId = state.job.id;
  const { result, query } = search;
  const href = (sequence: number) =>
    `/jobs/${encodeURIComponent(jobId)}?log_line=${sequence}&log_search=${encodeURIComponent(query)}#L${sequence}`;
  const items = result.matches
    .map(
      (m) =>
        `<li><a class="search-hit" href="${escapeHtml(href(m.sequence))}">line ${m.sequence}</a> <code class="log-excerpt">${ansiToHtml(m.text, query)}</code></li>`,
    )
    .join("\n");
  const more =
    result.next_cursor === null
      ? ""
      : ` <a id="log-search-more" href="/jobs/${encodeURIComponent(jobId)}?log_search=${encodeURIComponent(query)}&log_search_cursor=${encodeURIComponent(result.next_cursor)}#log-search">More matches after line ${result.searched_to} →</a>`;
  const said =
    result.matches.length === 0
      ? `No line of the log contains “${escapeHtml(query)}”.`
      : `${result.matches.length} line${result.matches.length === 1 ? "" : "s"} ${search.cursor === undefined ? "" : `after line ${escapeHtml(search.cursor.slice(1))} `}contain${result.matches.length === 1 ? "s" : ""} “${escapeHtml(query)}”:`;
  return `<section id="log-search"><p id="log-search-summary">${said}${more}</p>${items === "" ? "" : `<ol class="search-hits">${items}</ol>`}</section>`;
}

/**
 * The log part of the job page: the toolbar (search across the whole log, the timestamps
 * toggle, raw downloads, jump to the end), the search's hits, and the page's lines folded.
 * Until the job ends the page script streams on from this page's cursor; a full page also links
 * the next one. A terminal job's log is read by its pages, not streamed into one document.
 */
export function renderLogView(state: LogViewState): string {
  const { job, log } = state;
  const id = encodeURIComponent(job.id);
  const firstError = log.records.find((r) => isErrorLine(r.text));
  const follow = !log.settled && !TERMINAL_JOB_STATUSES.has(job.status);
  const needle = state.search?.query ?? null;
  const first = log.records[0]?.sequence;
  const previous =
    first === undefined || first <= 1
      ? ""
      : `<a id="log-previous" href="/jobs/${id}${first - 1 - LOG_RECORDS_PER_PAGE <= 0 ? "" : `?log_cursor=${encodeURIComponent(encodeLogCursor(first - 1 - LOG_RECORDS_PER_PAGE))}`}#log">← Previous ${LOG_RECORDS_PER_PAGE} lines</a> `;
  const next =
    log.next_cursor === null || log.records.length < LOG_RECORDS_PER_PAGE
      ? ""
      : `<a id="log-more" href="/jobs/${id}?log_cursor=${encodeURIComponent(log.next_cursor)}#log">Next ${LOG_RECORDS_PER_PAGE} lines →</a>`;
  const last = log.watermarks.durable;
  const end =
    TERMINAL_JOB_STATUSES.has(job.status) && last > 0
      ? ` <a id="log-end" href="${escapeHtml(logLineHref(job.id, last))}">Jump to the end (line ${last})</a>`
      : "";
  const empty =
    log.records.length === 0
      ? `<p class="muted" id="log-empty">${state.logCursor === undefined ? "No log lines yet." : "No more log lines."}</p>`
      : "";
  const toolbar = `<div class="log-toolbar"><form class="log-search" method="get" action="/jobs/${id}#log-search" role="search"><input type="search" name="log_search" value="${escapeHtml(needle ?? "")}" placeholder="Search the whole log" aria-label="Search the whole log" maxlength="200"><button type="submit">Search</button></form>
<a id="log-raw" href="/jobs/${id}/log.txt" download>Raw log (.txt)</a><a id="evidence-json" href="/jobs/${id}/evidence.json" download>Evidence (.json)</a>${end}</div>`;
  return `<section class="log-view" id="log-view"><h2 id="log">Log</h2>${toolbar}${renderSearch(state)}<p><a id="first-error-link" href="#${firstError === undefined ? "log" : `L${firstError.sequence}`}"${firstError === undefined ? " hidden" : ""}>Jump to the first error</a></p>${empty}
<p class="notice" id="log-trimmed" hidden>Following the newest lines; earlier ones are on <a href="/jobs/${id}?log_line=1#L1">the log's pages</a>.</p>
<input type="checkbox" id="log-times"><label class="log-toggle" for="log-times"> Timestamps (UTC)</label>
<div class="log" id="log-lines" data-cursor="${escapeHtml(log.next_cursor ?? "")}" data-follow="${follow ? "true" : "false"}">${renderBlocks(state, needle)}</div>${previous === "" && next === "" ? "" : `<p class="log-pages">${previous}${next}</p>`}</section>`;
}
