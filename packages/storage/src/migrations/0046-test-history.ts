import type { Kysely, Migration } from "kysely";

/**
 * A repository's test history (issue 37, repositories.tests). `test_runs` holds one row per job
 * whose finished attempt reported tests; a window is the repository's newest rows of it
 * (`test_runs_window`: tenant, repository, finished_at, job_id). `test_outcomes` holds one row
 * per test of that attempt (passed, failed, flaky or ignored, with its measured duration),
 * bounded per job (record-test-outcomes.ts); a page of tests is grouped over the window's jobs,
 * and a page's tests' runs are read by `test_outcomes_by_test` (tenant, repository, target,
 * name, finished_at). Both are written in the transaction that finishes the attempt.
 */
export function testHistory(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("test_runs")
        .addColumn("job_id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("attempt", "integer", (c) => c.notNull())
        .addColumn("finished_at", "text", (c) => c.notNull())
        .addColumn("tests", "integer", (c) => c.notNull())
        .addColumn("recorded", "integer", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("test_runs_window")
        .on("test_runs")
        .columns(["tenant_id", "repository", "finished_at", "job_id"])
        .execute();
      await db.schema
        .createTable("test_outcomes")
        .addColumn("job_id", "text", (c) => c.notNull())
        .addColumn("target", "text", (c) => c.notNull())
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("attempt", "integer", (c) => c.notNull())
        .addColumn("outcome", "text", (c) => c.notNull())
        .addColumn("duration_ms", "integer")
        .addColumn("finished_at", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("test_outcomes_pk", ["job_id", "target", "name"])
        .execute();
      await db.schema
        .createIndex("test_outcomes_by_test")
        .on("test_outcomes")
        .columns(["tenant_id", "repository", "target", "name", "finished_at"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("test_outcomes").execute();
      await db.schema.dropTable("test_runs").execute();
    },
  };
}
