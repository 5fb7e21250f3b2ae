import { type Kysely, sql } from "kysely";
import { fetchKeysetPage, type KeysetSortColumn } from "../pagination/keyset-page.js";
import type { Database, TestOutcomesTable } from "../schema.js";

export type TestHistorySort = "name" | "slowest" | "flakiest" | "newly_failing";

/** One test's counts over the window, as grouped. */
export interface TestHistoryGroup {
  target: string;
  name: string;
  runs: number;
  passed: number;
  failed: number;
  flaky: number;
  ignored: number;
  /** Mean measured duration (ms, rounded by the engine); -1 when none was measured. */
  mean_ms: number;
  last_at: string;
  /** When it last failed; "" when it did not fail in the window. */
  last_failed_at: string;
  /** When it last passed or was flaky; "" when it did not. */
  last_passed_at: string;
}

export interface TestHistoryRun {
  readonly jobId: string;
  readonly attempt: number;
  readonly outcome: TestOutcomesTable["outcome"];
  readonly durationMs: number | null;
  readonly finishedAt: string;
}

export interface TestHistoryPageRows {
  /** The window's jobs, newest first. */
  readonly window: readonly { readonly jobId: string; readonly finishedAt: string }[];
  readonly tests: readonly (TestHistoryGroup & { readonly recent: readonly TestHistoryRun[] })[];
  readonly nextCursor: string | null;
}

/** Which page of which repository's history, over how many of its newest test jobs. */
export interface TestHistoryQuery {
  readonly tenantId: string;
  readonly repository: string;
  readonly window: number;
  readonly sort: TestHistorySort;
  readonly limit: number;
  readonly cursor: string | null;
}

const SORTS: Record<TestHistorySort, readonly KeysetSortColumn<TestHistoryGroup>[]> = {
  name: [
    ["target", "asc", "text"],
    ["name", "asc", "text"],
  ],
  slowest: [
    ["mean_ms", "desc", "integer"],
    ["target", "asc", "text"],
    ["name", "asc", "text"],
  ],
  flakiest: [
    ["flaky", "desc", "integer"],
    ["target", "asc", "text"],
    ["name", "asc", "text"],
  ],
  newly_failing: [
    ["last_failed_at", "desc", "text"],
    ["target", "asc", "text"],
    ["name", "asc", "text"],
  ],
};

/** Tests whose runs one query reads (an OR of (target, name) pairs). */
const TESTS_PER_RUNS_QUERY = 100;

const counted = (outcome: string) => sql<number>`sum(case when outcome = ${outcome} then 1 else 0 end)`;

/**
 * A page of a repository's test history over its newest `window` test jobs (test_runs, migration
 * 0046): each test's counts grouped over the window, ordered and kept by `sort` (flakiest keeps
 * the tests flaky at least once, newly_failing those whose latest run failed after an earlier one
 * passed), keyset-paged, with each test's runs in the window, newest first. The caller checks
 * the repository is the tenant's; this reads only the tenant's rows either way.
 */
export async function listTestHistory(db: Kysely<Database>, input: TestHistoryQuery): Promise<TestHistoryPageRows> {
  const { tenantId, repository } = input;
  const windowRows = await db
    .selectFrom("test_runs")
    .select(["job_id", "finished_at"])
    .where("tenant_id", "=", tenantId)
    .where("repository", "=", repository)
    .orderBy("finished_at", "desc")
    .orderBy("job_id", "desc")
    .limit(input.window)
    .execute();
  const window = windowRows.map((r) => ({ jobId: r.job_id, finishedAt: r.finished_at }));
  if (window.length === 0) return { window, tests: [], nextCursor: null };
  const jobIds = window.map((w) => w.jobId);
  // By job id alone (the window's jobs are the tenant's repository's, read above): the primary key
  // then reads exactly the window's rows. With the tenant and repository also named, SQLite's
  // planner walked test_outcomes_by_test over the repository's whole history instead.
  const grouped = db
    .selectFrom("test_outcomes")
    .where("job_id", "in", jobIds)
    .groupBy(["target", "name"])
    .select([
      "target",
      "name",
      sql<number>`count(*)`.as("runs"),
      counted("passed").as("passed"),
      counted("failed").as("failed"),
      counted("flaky").as("flaky"),
      counted("ignored").as("ignored"),
      sql<number>`coalesce(cast(avg(duration_ms) as bigint), -1)`.as("mean_ms"),
      sql<string>`max(finished_at)`.as("last_at"),
      sql<string>`coalesce(max(case when outcome = 'failed' then finished_at end), '')`.as("last_failed_at"),
      sql<string>`coalesce(max(case when outcome in ('passed', 'flaky') then finished_at end), '')`.as(
        "last_passed_at",
      ),
    ]);
  let query = db.selectFrom(grouped.as("t")).selectAll();
  if (input.sort === "flakiest") query = query.where("flaky", ">", 0);
  if (input.sort === "newly_failing") {
    query = query.whereRef("last_failed_at", "=", "last_at").where("last_passed_at", "<>", "");
  }
  const page = await fetchKeysetPage(query, { sort: SORTS[input.sort], limit: input.limit, cursor: input.cursor });
  const runs = new Map<string, TestHistoryRun[]>();
  for (let start = 0; start < page.rows.length; start += TESTS_PER_RUNS_QUERY) {
    const tests = page.rows.slice(start, start + TESTS_PER_RUNS_QUERY);
    const rows = await db
      .selectFrom("test_outcomes")
      .select(["target", "name", "job_id", "attempt", "outcome", "duration_ms", "finished_at"])
      .where("tenant_id", "=", tenantId)
      .where("repository", "=", repository)
      .where("job_id", "in", jobIds)
      .where((eb) => eb.or(tests.map((t) => eb.and([eb("target", "=", t.target), eb("name", "=", t.name)]))))
      .orderBy("finished_at", "desc")
      .orderBy("job_id", "desc")
      .execute();
    for (const r of rows) {
      const key = JSON.stringify([r.target, r.name]);
      const list = runs.get(key) ?? [];
      list.push({
        jobId: r.job_id,
        attempt: r.attempt,
        outcome: r.outcome,
        durationMs: r.duration_ms,
        finishedAt: r.finished_at,
      });
      runs.set(key, list);
    }
  }
  return {
    window,
    tests: page.rows.map((t) => ({ ...t, recent: runs.get(JSON.stringify([t.target, t.name])) ?? [] })),
    nextCursor: page.nextCursor,
  };
}
