import type { Kysely } from "kysely";
import type { Database, TestOutcomesTable } from "../schema.js";

/**
 * Tests of one job kept in its history: enough for a large suite (regex's 7,847) with room to
 * spare, bounded so one job's evidence cannot fill the table. The job's `test_runs` row says how
 * many it reported and how many were kept.
 */
export const MAX_RECORDED_TESTS_PER_JOB = 20_000;

/** Rows per INSERT: nine values each, well under either engine's bound on parameters. */
const ROWS_PER_INSERT = 500;

/** A test item of the stored attempt report, as far as the history reads it (the report is an open object). */
interface ReportedTest {
  readonly target?: unknown;
  readonly name?: unknown;
  readonly outcome?: unknown;
  readonly flaky?: unknown;
  readonly duration_ms?: unknown;
}

/** How the evidence's test ended, as the history keeps it: a passed test marked flaky is flaky. */
function historyOutcomeOf(test: ReportedTest): TestOutcomesTable["outcome"] | null {
  if (test.outcome === "passed") return test.flaky === true ? "flaky" : "passed";
  if (test.outcome === "failed" || test.outcome === "ignored") return test.outcome;
  return null;
}

function testsOfReport(report: string): ReportedTest[] {
  const parsed: unknown = JSON.parse(report);
  if (typeof parsed !== "object" || parsed === null) return [];
  const tests = (parsed as { tests?: unknown }).tests;
  return Array.isArray(tests) ? (tests as ReportedTest[]) : [];
}

/**
 * Records the tests of a finished attempt's report (its JSON as stored in `attempts.report`) in
 * the repository's test history, in the finishing transaction: one `test_runs` row and a
 * `test_outcomes` row per test (the first MAX_RECORDED_TESTS_PER_JOB; a test named twice counts
 * once). An attempt that reported no tests records nothing, so build jobs never enter a window.
 */
export async function recordTestOutcomes(
  trx: Kysely<Database>,
  input: {
    readonly jobId: string;
    readonly tenantId: string;
    readonly repository: string;
    readonly attempt: number;
    readonly finishedAt: string;
    readonly report: string;
  },
): Promise<void> {
  const reported = testsOfReport(input.report);
  if (reported.length === 0) return;
  const seen = new Set<string>();
  const rows: TestOutcomesTable[] = [];
  for (const test of reported) {
    if (rows.length === MAX_RECORDED_TESTS_PER_JOB) break;
    const outcome = historyOutcomeOf(test);
    if (outcome === null || typeof test.target !== "string" || typeof test.name !== "string") continue;
    const key = JSON.stringify([test.target, test.name]);
    if (seen.has(key)) continue;
    seen.add(key);
    const duration = test.duration_ms;
    rows.push({
      job_id: input.jobId,
      target: test.target,
      name: test.name,
      tenant_id: input.tenantId,
      repository: input.repository,
      attempt: input.attempt,
      outcome,
      duration_ms: typeof duration === "number" && Number.isSafeInteger(duration) && duration >= 0 ? duration : null,
      finished_at: input.finishedAt,
    });
  }
  await trx
    .insertInto("test_runs")
    .values({
      job_id: input.jobId,
      tenant_id: input.tenantId,
      repository: input.repository,
      attempt: input.attempt,
      finished_at: input.finishedAt,
      tests: reported.length,
      recorded: rows.length,
    })
    .execute();
  for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
    await trx
      .insertInto("test_outcomes")
      .values(rows.slice(start, start + ROWS_PER_INSERT))
      .execute();
  }
}
