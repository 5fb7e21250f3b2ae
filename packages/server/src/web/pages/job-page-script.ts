import { ansiSegments, isErrorLine } from "./ansi-log.js";
import { binaryOfLogLine, elapsedText, stepOfLogLine } from "./job-live-view.js";

/**
 * What the job page does without a reload, served from /assets (the page policy allows no
 * inline script):
 * - follows jobs.logs_stream from the rendered page's cursor, appending each line as DOM
 *   nodes whose text is set as textContent (log text is never parsed as markup), coloured by
 *   the same ansiSegments the server uses, until the settled page arrives;
 * - keeps the "first error" link pointing at the first error line;
 * - reconciles the job's parts (status, phases, tests, …) against the page itself whenever
 *   events.stream hints that this job changed, or the log settled: it fetches the page and
 *   swaps `#job-parts` for the fresh server-rendered one (one renderer, no second copy of it);
 * - filters the tests table by outcome and search text, and finds a failed test's output.
 */
const JOB_PAGE_MAIN = `
const parts = () => document.getElementById("job-parts");
const logLines = document.getElementById("log-lines");
const firstErrorLink = document.getElementById("first-error-link");
const jobId = document.body.dataset.job;

function markFirstError(line) {
  if (firstErrorLink === null || !firstErrorLink.hidden) return;
  firstErrorLink.href = "#" + line.id;
  firstErrorLink.hidden = false;
}

/**
 * Lines kept on the page while following: a log of 100,000 lines must not grow the document
 * without bound (layout of every appended line slows with it). Followed lines are built in chunks
 * (one a frame, of at most LINES_PER_CHUNK lines, however many came meanwhile); each chunk is a block the
 * browser skips laying out while it is off screen (content-visibility), and whole chunks
 * beyond this many lines are dropped from the top. The log's pages (server-rendered, 1,000
 * lines each) still show every line.
 */
const FOLLOWED_LINES_KEPT = 5000;
const LINES_PER_CHUNK = 100;
let linesKept = logLines === null ? 0 : logLines.querySelectorAll(".line").length;

function trimFollowed() {
  let trimmed = false;
  while (linesKept > FOLLOWED_LINES_KEPT) {
    const first = logLines.firstElementChild;
    if (first === null) break;
    if (first.classList.contains("chunk")) {
      // Only whole chunks go, and never the newest.
      if (first === logLines.lastElementChild) break;
      linesKept -= Number(first.dataset.lines);
    } else {
      // A server-rendered line (the page the log opened at).
      linesKept -= 1;
      if (first.nextSibling?.nodeType === 3) first.nextSibling.remove();
    }
    first.remove();
    trimmed = true;
  }
  if (trimmed) document.getElementById("log-trimmed").hidden = false;
}

function appendRecord(record, into) {
  const line = document.createElement("span");
  line.className = "line " + record.stream;
  line.id = "L" + record.sequence;
  const seq = document.createElement("a");
  seq.className = "seq";
  seq.href = "#L" + record.sequence;
  seq.textContent = String(record.sequence).padStart(5, " ") + " ";
  const time = document.createElement("time");
  time.className = "ts";
  time.dateTime = record.at;
  time.textContent = record.at.slice(11, 23) + " ";
  line.append(seq, time);
  for (const segment of ansiSegments(record.text)) {
    if (segment.classes === "") {
      line.append(segment.text);
    } else {
      const span = document.createElement("span");
      span.className = segment.classes;
      span.textContent = segment.text;
      line.append(span);
    }
  }
  into.append(line);
  if (isErrorLine(record.text)) markFirstError(line);
  noteLiveLine(record);
}

/**
 * The running job's live panel, kept up with the followed lines: the step the newest line names
 * (written at most every few seconds: the panel is a live region a screen reader reads out) and
 * each test binary's verdict as libtest prints it.
 */
let liveBinary = null;
let liveStep = null;
let liveStepTimer = null;
function noteLiveLine(record) {
  const binary = binaryOfLogLine(record.stream, record.text);
  if (binary !== null) liveBinary = binary;
  const step = stepOfLogLine(record.stream, record.text);
  if (step !== null) {
    liveStep = step;
    liveStepTimer ??= setTimeout(() => {
      liveStepTimer = null;
      const shown = document.getElementById("live-step");
      if (shown !== null && liveStep !== null) shown.textContent = liveStep;
    }, 2000);
  }
  if (record.stream !== "stdout" || !record.text.includes("test result: ")) return;
  const plain = ansiSegments(record.text).map((s) => s.text).join("");
  const tests = document.getElementById("live-tests");
  if (tests === null || !plain.startsWith("test result: ")) return;
  const item = document.createElement("li");
  item.className = plain.startsWith("test result: ok") ? "binary-ok" : "binary-failed";
  const name = document.createElement("span");
  name.className = "mono";
  name.textContent = liveBinary ?? "a test binary";
  item.append(name, ": " + plain.slice("test result: ".length));
  tests.append(item);
  document.getElementById("live-tests-none")?.setAttribute("hidden", "");
}

/** The running job's elapsed timer, ticked each second while the panel is on the page. */
function tickElapsed() {
  const timer = document.getElementById("live-elapsed");
  if (timer === null) return;
  timer.textContent = elapsedText(Date.now() - Date.parse(timer.dataset.since));
}

function applyTestFilter() {
  const table = document.getElementById("tests");
  if (table === null) return;
  const outcome = document.getElementById("tests-outcome")?.value ?? "";
  const search = (document.getElementById("tests-search")?.value ?? "").trim().toLowerCase();
  let shown = 0;
  for (const row of table.tBodies[0].rows) {
    const visible = (outcome === "" || row.dataset.outcome === outcome) && (search === "" || row.dataset.search.includes(search));
    row.hidden = !visible;
    if (visible) shown += 1;
  }
  const count = document.getElementById("tests-shown");
  if (count !== null) count.textContent = String(shown);
}

let refreshing = null;
let again = false;
/** Fetches this page and swaps in its fresh #job-parts; hints that arrive meanwhile coalesce. */
async function refreshParts() {
  if (refreshing !== null) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    do {
      again = false;
      const response = await fetch(location.pathname + location.search, { credentials: "same-origin" });
      if (!response.ok) return;
      const freshPage = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = freshPage.getElementById("job-parts");
      const current = parts();
      if (fresh === null || current === null) return;
      const outcome = document.getElementById("tests-outcome")?.value;
      const search = document.getElementById("tests-search")?.value;
      current.replaceWith(document.adoptNode(fresh));
      // A running job's details sit below its log; once it ended, everything is above it.
      const details = freshPage.getElementById("job-details");
      const currentDetails = document.getElementById("job-details");
      if (currentDetails !== null && details !== null) currentDetails.replaceWith(document.adoptNode(details));
      else if (currentDetails !== null) currentDetails.remove();
      tickElapsed();
      if (outcome !== undefined && document.getElementById("tests-outcome")) document.getElementById("tests-outcome").value = outcome;
      if (search !== undefined && document.getElementById("tests-search")) document.getElementById("tests-search").value = search;
      applyTestFilter();
    } while (again);
  })().finally(() => {
    refreshing = null;
  });
  return refreshing;
}

function followLog() {
  if (logLines === null || logLines.dataset.follow !== "true") return;
  const cursor = logLines.dataset.cursor;
  const stream = new EventSource("/api/jobs/" + encodeURIComponent(jobId) + "/logs/stream?limit=1000" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
  document.getElementById("log-empty")?.remove();
  let pending = [];
  let settled = false;
  let scheduled = false;
  function schedule() {
    if (scheduled) return;
    scheduled = true;
    // One DOM update per frame; a hidden page gets no frames, so it updates on a timer.
    if (document.hidden) setTimeout(flush, 100);
    else requestAnimationFrame(flush);
  }
  // At most one chunk of lines a frame, however many arrived: a burst is built over several
  // frames, each a short task, instead of one task that freezes the page (bench/dashboard-log.mjs).
  function flush() {
    scheduled = false;
    if (pending.length > FOLLOWED_LINES_KEPT) {
      // More arrived than the page keeps: only the newest are built at all.
      pending = pending.slice(-FOLLOWED_LINES_KEPT);
      document.getElementById("log-trimmed").hidden = false;
    }
    const part = pending.splice(0, LINES_PER_CHUNK);
    if (part.length > 0) {
      const atEnd = logLines.scrollTop + logLines.clientHeight >= logLines.scrollHeight - 4;
      const chunk = document.createElement("span");
      chunk.className = "chunk";
      chunk.dataset.lines = String(part.length);
      chunk.style.containIntrinsicSize = "auto " + (part.length * 1.35).toFixed(2) + "em";
      for (const record of part) appendRecord(record, chunk);
      logLines.append(chunk);
      linesKept += part.length;
      trimFollowed();
      if (atEnd) logLines.scrollTop = logLines.scrollHeight;
    }
    if (pending.length > 0) schedule();
    else if (settled) {
      logLines.dataset.follow = "settled";
      void refreshParts();
    }
  }
  stream.addEventListener("log", (event) => {
    const frame = JSON.parse(event.data);
    for (const record of frame.page.records) pending.push(record);
    if (frame.page.settled) {
      // The stream ends after the settled page; EventSource would otherwise reconnect.
      stream.close();
      settled = true;
    }
    schedule();
  });
}

function watchJob() {
  if (document.body.dataset.terminal === "true") return;
  const events = new EventSource("/api/events");
  // Hints start when the stream opens: reconcile once then, so a change before it is not missed.
  events.addEventListener("open", () => void refreshParts());
  events.addEventListener("job", (event) => {
    if (JSON.parse(event.data).job === jobId) void refreshParts();
  });
}

document.addEventListener("input", (event) => {
  if (event.target.id === "tests-search" || event.target.id === "tests-outcome") applyTestFilter();
});
document.addEventListener("change", (event) => {
  if (event.target.id === "tests-outcome") applyTestFilter();
});
// A failed test's output: the first log line of its captured output, or its FAILED line.
document.addEventListener("click", (event) => {
  const link = event.target.closest?.("a.test-output");
  if (!link || logLines === null) return;
  const name = link.dataset.test;
  const lines = [...logLines.querySelectorAll(".line")];
  // A panic the host placed: its line, or (on another log page) the link opens that page.
  const line = link.dataset.line
    ? (document.getElementById("L" + link.dataset.line) ?? undefined)
    : (lines.find((l) => l.textContent.includes("---- " + name + " stdout ----")) ??
      lines.find((l) => l.textContent.includes("test " + name + " ") && l.textContent.includes("FAILED")));
  if (line === undefined) return;
  event.preventDefault();
  showLine(line);
  history.replaceState(null, "", "#" + line.id);
});

/** Shows a line of this page: opens the folds around it, highlights it and scrolls to it. */
function showLine(line) {
  for (let fold = line.closest("details"); fold !== null; fold = fold.parentElement.closest("details")) fold.open = true;
  for (const old of logLines.querySelectorAll(".line.found")) old.classList.remove("found");
  line.classList.add("found");
  line.scrollIntoView({ block: "center" });
}

// A line number marks its line in place, and the address becomes the line's permalink
// (?log_line=N#LN opens the page holding it, from anywhere); a link to a line of this page
// (the first error, a search hit, the end) marks it in place too.
document.addEventListener("click", (event) => {
  const link = event.target.closest?.("a.seq, a.search-hit, #first-error-link, #log-end");
  if (!link || logLines === null) return;
  const target = new URL(link.href, location.href);
  if (target.pathname !== location.pathname) return;
  const line = target.hash.startsWith("#L") ? document.getElementById(target.hash.slice(1)) : null;
  if (line === null || !logLines.contains(line)) return;
  event.preventDefault();
  showLine(line);
  const sequence = target.hash.slice(2);
  const search = new URLSearchParams(location.search);
  search.delete("log_cursor");
  search.set("log_line", sequence);
  history.replaceState(null, "", location.pathname + "?" + search.toString() + "#L" + sequence);
});

// Opened at a line (a permalink, a failure's or a search hit's link): show it even inside a fold.
if (logLines !== null && location.hash.startsWith("#L")) {
  const line = document.getElementById(location.hash.slice(1));
  if (line !== null && logLines.contains(line)) showLine(line);
}

followLog();
watchJob();
if (document.body.dataset.terminal !== "true") setInterval(tickElapsed, 1000);
`;

/** The job page's script: the shared ANSI parser and error matcher, then the page's own code. */
export const JOB_PAGE_SCRIPT = `"use strict";
${ansiSegments.toString()}
${isErrorLine.toString()}
${stepOfLogLine.toString()}
${binaryOfLogLine.toString()}
${elapsedText.toString()}
${JOB_PAGE_MAIN}`;
