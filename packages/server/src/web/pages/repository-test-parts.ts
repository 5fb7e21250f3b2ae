import type { ResponseDocumentOf } from "@kiln/contract";
import { formatDuration, formatTime } from "./dashboard-layout.js";
import { escapeHtml } from "./html.js";
import { type PageContext, performAsPerson } from "./perform-as-person.js";

type TestHistoryPage = ResponseDocumentOf<"repositories.tests">;
type TestHistory = TestHistoryPage["tests"][number];

/** Tests per list on the repository page; `kiln tests` and repositories.tests page through the rest. */
const TESTS_PER_LIST = 10;

const LISTS = [
  ["flakiest", "Flakiest", "failed, then passed on a re-run", "No flaky tests in these jobs."],
  ["newly_failing", "Newly failing", "the latest run failed after an earlier one passed", "Nothing newly failing."],
  ["slowest", "Slowest", "by mean duration", "No measured durations."],
] as const;

const OUTCOME_MARK = { passed: "✓", failed: "✗", flaky: "~", ignored: "–" } as const;

/** Its runs, oldest to newest, each a mark linking to its job. */
function runMarks(t: TestHistory): string {
  return [...t.recent]
    .reverse()
    .map(
      (r) =>
        `<a class="run run-${r.outcome}" href="/jobs/${encodeURIComponent(r.job)}" title="${escapeHtml(`${r.outcome} in ${r.job}, ${formatTime(r.finished_at)}`)}">${OUTCOME_MARK[r.outcome]}</a>`,
    )
    .join("");
}

function trendText(t: TestHistory): string {
  return t.trend.ratio === null ? t.trend.direction : `${t.trend.direction} (×${t.trend.ratio.toFixed(2)})`;
}

function renderList(id: string, title: string, note: string, empty: string, page: TestHistoryPage): string {
  const heading = `<h3>${escapeHtml(title)} <span class="muted">(${escapeHtml(note)})</span></h3>`;
  if (page.tests.length === 0) return `${heading}<p class="muted" id="tests-${id}">${escapeHtml(empty)}</p>`;
  const rows = page.tests
    .map(
      (t) =>
        `<tr data-test="${escapeHtml(t.name)}"><td class="mono">${escapeHtml(t.target)}: ${escapeHtml(t.name)}</td><td class="num">${t.runs}</td><td class="num">${t.flaky === 0 ? "—" : `${t.flaky} (${Math.round(t.flaky_rate * 100)}%)`}</td><td class="num">${escapeHtml(formatDuration(t.duration_ms.p50))}</td><td class="num">${escapeHtml(formatDuration(t.duration_ms.p90))}</td><td>${escapeHtml(trendText(t))}</td><td class="runs">${runMarks(t)}</td></tr>`,
    )
    .join("\n");
  return `${heading}<table id="tests-${id}"><thead><tr><th>Test</th><th>Runs</th><th>Flaky</th><th>p50</th><th>p90</th><th>Trend</th><th>Runs, old → new</th></tr></thead><tbody>
${rows}</tbody></table>`;
}

/**
 * The repository page's Tests section from the test history (repositories.tests, read as the
 * signed-in person): the flakiest, the newly failing and the slowest tests of its recent test jobs.
 */
export async function renderRepositoryTests(
  ctx: PageContext,
  params: { owner: string; name: string },
): Promise<string> {
  const pages = await Promise.all(
    LISTS.map(([sort]) =>
      performAsPerson(ctx, "repositories.tests", { params, query: { sort, limit: TESTS_PER_LIST } }),
    ),
  );
  const window = pages[0]?.window;
  if (window === undefined || window.jobs === 0) {
    return `<p class="muted" id="tests-none">No test jobs yet: each <code>kiln cargo test</code> job's tests are kept here.</p>`;
  }
  const lists = LISTS.map(([sort, title, note, empty], i) => {
    const page = pages[i];
    return page === undefined ? "" : renderList(sort, title, note, empty, page);
  });
  return `<p id="tests-window">Over the last ${window.jobs} test jobs (${formatTime(window.from)} to ${formatTime(window.to)}). All of them: <code>kiln tests ${escapeHtml(`${params.owner}/${params.name}`)}</code>.</p>
${lists.join("\n")}`;
}
