import type { ResponseDocumentOf } from "@kiln/contract";
import { type Db, listTestHistory, type TestHistoryQuery, type TestHistoryRun } from "@kiln/storage";
import { requireOnboarded } from "./require-onboarded.js";

type TestHistoryPage = ResponseDocumentOf<"repositories.tests">;
type TestHistory = TestHistoryPage["tests"][number];

/** A trend is named when the newer half's median is at least this much slower (or 1/this faster). */
const TREND_RATIO = 1.2;
/** Measured runs a trend needs: two in each half. */
const TREND_MIN_RUNS = 4;

/** The nearest-rank percentile of sorted values; null when there are none. */
function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1] ?? null;
}

const ascending = (values: readonly number[]) => [...values].sort((a, b) => a - b);

/**
 * How a test's duration moved across the window: the median of the newer half of its measured
 * runs against the older half's (runs newest first).
 */
export function durationTrend(recent: readonly TestHistoryRun[]): TestHistory["trend"] {
  const measured = recent.flatMap((r) => (r.durationMs === null || r.outcome === "ignored" ? [] : [r.durationMs]));
  if (measured.length < TREND_MIN_RUNS) {
    return { earlier_p50_ms: null, recent_p50_ms: null, ratio: null, direction: "unknown" };
  }
  const half = Math.floor(measured.length / 2);
  const recentP50 = percentile(ascending(measured.slice(0, half)), 50);
  const earlierP50 = percentile(ascending(measured.slice(measured.length - half)), 50);
  if (recentP50 === null || earlierP50 === null || earlierP50 === 0) {
    return { earlier_p50_ms: earlierP50, recent_p50_ms: recentP50, ratio: null, direction: "unknown" };
  }
  const ratio = Math.round((recentP50 / earlierP50) * 1000) / 1000;
  const direction = ratio >= TREND_RATIO ? "slower" : ratio <= 1 / TREND_RATIO ? "faster" : "steady";
  return { earlier_p50_ms: earlierP50, recent_p50_ms: recentP50, ratio, direction };
}

/**
 * repositories.tests: the repository's test history over its newest `window` test jobs (test
 * outcomes are recorded as each job's attempt finishes, storage test-history/). not_found unless
 * the repository is onboarded for the caller's tenant — another tenant's is refused exactly as
 * one that does not exist.
 */
export async function readTestHistory(db: Db, input: TestHistoryQuery): Promise<TestHistoryPage> {
  await requireOnboarded(db, input.tenantId, input.repository);
  const page = await listTestHistory(db, input);
  const newest = page.window[0];
  const oldest = page.window.at(-1);
  return {
    repository: input.repository,
    window: { jobs: page.window.length, from: oldest?.finishedAt ?? null, to: newest?.finishedAt ?? null },
    sort: input.sort,
    tests: page.tests.map((t) => {
      const durations = ascending(
        t.recent.flatMap((r) => (r.durationMs === null || r.outcome === "ignored" ? [] : [r.durationMs])),
      );
      const latest = t.recent[0];
      return {
        target: t.target,
        name: t.name,
        runs: t.runs,
        passed: t.passed,
        failed: t.failed,
        flaky: t.flaky,
        ignored: t.ignored,
        flaky_rate: t.runs === 0 ? 0 : Math.round((t.flaky / t.runs) * 1000) / 1000,
        latest_outcome: latest?.outcome ?? "passed",
        newly_failing: t.last_failed_at !== "" && t.last_failed_at === t.last_at && t.last_passed_at !== "",
        duration_ms: { p50: percentile(durations, 50), p90: percentile(durations, 90) },
        trend: durationTrend(t.recent),
        recent: t.recent.map((r) => ({
          job: r.jobId,
          attempt: r.attempt,
          outcome: r.outcome,
          duration_ms: r.durationMs,
          finished_at: r.finishedAt,
        })),
      };
    }),
    next_cursor: page.nextCursor,
  };
}
