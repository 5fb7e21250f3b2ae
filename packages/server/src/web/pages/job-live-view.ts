import type { ResponseDocumentOf } from "@kiln/contract";
import { escapeHtml } from "./html.js";

type Job = ResponseDocumentOf<"jobs.get">;

/** A test binary that finished while the job runs: its name and libtest's verdict line. */
export interface FinishedBinary {
  readonly binary: string;
  readonly verdict: string;
}

/** What the running-job view shows above its log: the step now under way and the binaries done. */
export interface LiveFacts {
  /** What the newest log line says is happening, or null before any line says. */
  readonly step: string | null;
  readonly binaries: readonly FinishedBinary[];
}

/**
 * What a log line says the job is doing now (`compiling serde`, `testing unittests src/lib.rs`),
 * or null when it says nothing of the kind. Read from cargo's own progress lines and kiln's, the
 * same on the server (the page as rendered) and in the page script (each line as it streams).
 *
 * Self-contained on purpose (no imports, no outer names): the job page's script embeds this
 * very function's source, as it does ansiSegments.
 */
export function stepOfLogLine(stream: string, line: string): string | null {
  // Cargo's progress is on stderr, kiln's on its own stream; libtest's stdout names no step.
  if (stream === "stdout") return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC
  const plain = line.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "");
  if (stream === "system") {
    if (/^kiln: dependency gateway/.test(plain)) return "fetching dependencies";
    if (/^kiln: cargo (exited|ended)/.test(plain)) return "saving the cache and artifacts";
    if (/^kiln: (\S*\/)?cargo \S/.test(plain)) return "starting cargo";
    if (/lineage|cache/.test(plain)) return "restoring the cache";
    return null;
  }
  if (stream !== "stderr") return null;
  const progress =
    /^\s*(Compiling|Checking|Documenting|Running|Doc-tests|Finished|Updating|Downloading|Downloaded|Locking)\s+(.*)$/.exec(
      plain,
    );
  if (progress === null) return null;
  const [, verb, rest = ""] = progress;
  const subject = rest.replace(/\s+\(.*\)$/, "").replace(/\s+v\d\S*$/, "");
  if (verb === "Compiling") return `compiling ${subject}`;
  if (verb === "Checking") return `checking ${subject}`;
  if (verb === "Documenting") return `documenting ${subject}`;
  if (verb === "Running") return `testing ${subject}`;
  if (verb === "Doc-tests") return `running ${subject}'s doc-tests`;
  if (verb === "Finished") return "built; starting the tests";
  return "resolving dependencies";
}

/** The test binary a cargo `Running …` or `Doc-tests …` line starts, or null. Self-contained (embedded in the page script). */
export function binaryOfLogLine(stream: string, line: string): string | null {
  if (stream !== "stderr") return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC
  const plain = line.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "");
  const start = /^\s*(Running|Doc-tests)\s+(.*?)(\s+\(.*\))?$/.exec(plain);
  if (start === null) return null;
  return start[1] === "Doc-tests" ? `doc-tests ${start[2]}` : (start[2] ?? "");
}

/**
 * The status panel of a job that has not ended, first on its page above the live log: what it
 * is doing now and for how long, and each test binary's verdict as it finishes. The panel is a
 * polite live region; the elapsed timer, which the page script ticks each second, is outside it
 * (a screen reader would otherwise read every second).
 */
export function renderLiveStatus(job: Job, live: LiveFacts): string {
  const step =
    job.status === "queued"
      ? `waiting for a host${job.queue_annotation === null ? "" : `: ${job.queue_annotation}`}`
      : job.status === "cancellation_requested"
        ? "cancelling: stopping the sandbox"
        : (live.step ?? "starting");
  const since = job.started_at ?? job.accepted_at;
  const binaries = live.binaries
    .map(
      (b) =>
        `<li class="${/^test result: ok/.test(b.verdict) ? "binary-ok" : "binary-failed"}"><span class="mono">${escapeHtml(b.binary)}</span>: ${escapeHtml(b.verdict.replace(/^test result: /, ""))}</li>`,
    )
    .join("");
  return `<section class="live" id="live"><p class="live-clock">${job.started_at === null ? "Waiting" : "Running"} for <span id="live-elapsed" data-since="${escapeHtml(since)}">${escapeHtml(elapsedText(Date.now() - Date.parse(since)))}</span> · since <time datetime="${escapeHtml(since)}">${escapeHtml(since.slice(11, 19))} UTC</time></p>
<div id="live-status" role="status" aria-live="polite"><p><strong>Now:</strong> <span id="live-step">${escapeHtml(step)}</span></p>
<p id="live-tests-none"${binaries === "" ? "" : " hidden"} class="muted">No test binary has finished yet.</p><ol id="live-tests" class="live-tests">${binaries}</ol></div></section>`;
}

/** Milliseconds as the timer shows them: `42 s`, `3 min 05 s`, `1 h 02 min`. Self-contained (embedded in the page script). */
export function elapsedText(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${String(seconds % 60).padStart(2, "0")} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}
