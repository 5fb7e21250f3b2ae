import type { Kysely, Migration } from "kysely";

/**
 * The repository settings `flaky_retries` (0..5: how many times a test job re-runs a failed
 * test by its exact name) and `flaky_policy` (`pass` | `fail`: whether a test that failed and
 * then passed passes the job), issue 37. Null is the platform default (2, `pass`), like every
 * other repository setting.
 */
export function flakyRetriesSettings(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("repository_settings").addColumn("flaky_retries", "integer").execute();
      await db.schema.alterTable("repository_settings").addColumn("flaky_policy", "text").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("repository_settings").dropColumn("flaky_policy").execute();
      await db.schema.alterTable("repository_settings").dropColumn("flaky_retries").execute();
    },
  };
}
