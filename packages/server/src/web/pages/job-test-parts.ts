import type { ResponseDocumentOf } from "@kiln/contract";
import { formatDuration, statusBadge } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";

/**
 * The job page's parts of issue 37's evidence (kiln extensions of the open report): the flaky
 * tests, apart from the failures, with every try; and cargo's timeline of the build, units as
 * bars on the attempt's wall time with the critical path highlighted. Server-rendered, no script.
 */

type Report = ResponseDocumentOf<"jobs.evidence">["report"];
type TestRow = Report["tests"][number];
type Timeline = NonNullable<Report["timeline"]>[number];
type Unit = Timeline["units"][number];

/** The page shows a try's output up to this many characters (the evidence keeps 64 KiB, its tail). */
const TRY_OUTPUT_SHOWN = 4000;

const lastAttemptOf = (items: readonly { attempt: number }[]) => Math.max(0, ...items.map((i) => i.attempt));

/**
 * The last attempt's flaky tests (failed, then passed on a re-run): how many, the policy that
 * decided the verdict, and per test each try's outcome, duration and output. Empty when none.
 */
export function renderFlakyTests(tests: readonly TestRow[], retries: Report["retries"]): string {
  const last = lastAttemptOf(tests);
  const flaky = tests.filter((t) => t.attempt === last && t.flaky === true);
  if (flaky.length === 0) return "";
  const policy =
    retries === undefined
      ? ""
      : ` Policy <strong>${escapeHtml(retries.flaky_policy)}</strong>: ${
          retries.flaky_policy === "pass" ? "a flaky test does not fail the job" : "a flaky test fails the job"
        }; ${retries.reruns} re-run${retries.reruns === 1 ? "" : "s"} took ${escapeHtml(formatDuration(retries.duration_ms))}.`;
  const rows = flaky.map((t) => {
    const tries = t.tries ?? [];
    const passed = tries.find((x) => x.outcome === "passed");
    const trySummary = tries
      .map((x) => `try ${x.try} ${statusBadge(x.outcome)} ${escapeHtml(formatDuration(x.duration_ms))}`)
      .join(" · ");
    const outputs = tries
      .filter((x) => x.output !== "")
      .map(
        (x) =>
          `<details class="try-output"><summary>try ${x.try} output (${escapeHtml(x.outcome)})</summary><pre>${escapeHtml(x.output.slice(-TRY_OUTPUT_SHOWN))}</pre></details>`,
      )
      .join("");
    return `<tr class="test-flaky" data-test="${escapeHtml(t.name)}"><td>${statusBadge("flaky")}</td><td class="mono">${escapeHtml(t.target)}</td><td class="mono">${escapeHtml(t.name)}${outputs}</td><td>${passed === undefined ? "passed on a re-run" : `passed on try ${passed.try} of ${tries.length}`}</td><td>${trySummary}</td></tr>`;
  });
  return `<p id="flaky-summary" class="notice"><strong>${flaky.length} flaky</strong> (failed, then passed on a re-run): counted passed, not failures.${policy}</p>
<table id="flaky-tests"><thead><tr><th>Outcome</th><th>Binary</th><th>Test</th><th>Verdict</th><th>Tries</th></tr></thead><tbody>
${rows.join("\n")}</tbody></table>`;
}

const unitKey = (u: Unit) => `${u.name}\u0000${u.version}\u0000${u.target}\u0000${u.start_ms}`;
const unitLabel = (u: Unit) => `${u.name} ${u.version} (${u.target})`;

/**
 * The last attempt's build timeline from cargo's `--timings`: one row per unit in start order,
 * its bar placed by its start and sized by its duration on the attempt's wall time (inline
 * styles, as the phases' timeline), the critical path's units highlighted and listed above.
 */
export function renderTimeline(timelines: readonly Timeline[]): string {
  const last = lastAttemptOf(timelines);
  const timeline = timelines.find((t) => t.attempt === last);
  if (timeline === undefined) return "";
  const wall = Math.max(1, timeline.wall_ms, ...timeline.units.map((u) => u.start_ms + u.duration_ms));
  const critical = new Set(timeline.critical_path.map(unitKey));
  const rows = [...timeline.units]
    .sort((a, b) => a.start_ms - b.start_ms || a.name.localeCompare(b.name))
    .map((u) => {
      const onPath = critical.has(unitKey(u));
      const left = (u.start_ms / wall) * 100;
      const width = Math.max((u.duration_ms / wall) * 100, 0.3);
      return `<tr class="unit${onPath ? " critical" : ""}" data-unit="${escapeHtml(u.name)}" data-critical="${onPath}"><td class="mono">${escapeHtml(unitLabel(u))}</td><td class="timeline"><div class="bar ${onPath ? "bar-critical" : "bar-unit"}" style="margin-left:${left.toFixed(2)}%;width:${Math.min(width, 100 - left).toFixed(2)}%" title="${escapeHtml(`${unitLabel(u)}: ${formatDuration(u.duration_ms)} from ${formatDuration(u.start_ms)}`)}"></div></td><td class="num">${escapeHtml(formatDuration(u.duration_ms))}</td></tr>`;
    });
  const path = timeline.critical_path.map((u) => escapeHtml(unitLabel(u))).join(" → ");
  return `<p id="timeline-summary">Wall time ${escapeHtml(formatDuration(timeline.wall_ms))}; critical path ${escapeHtml(formatDuration(timeline.critical_path_ms))} (<strong>${Math.round(timeline.critical_path_share * 100)}%</strong> of it): <span id="critical-path">${path}</span>. cargo's own report: <span class="mono">${escapeHtml(timeline.artifact)}</span> (Artifacts).</p>
<table id="timeline"><thead><tr><th>Unit</th><th class="timeline">Timeline (critical path highlighted)</th><th>Duration</th></tr></thead><tbody>
${rows.join("\n")}</tbody></table>`;
}
