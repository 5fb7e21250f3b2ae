import { type Kysely, type Migration, sql } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Advisory dismissals: which advisory (its id, which changes when its measured basis does) of
 * which repository a principal dismissed, and when. One row per advisory: the first dismissal is
 * the one remembered (a repeat is answered with it).
 *
 * Also an index for the advisories' own read: the recent finished attempts of one repository
 * (jobs by tenant, repository and acceptance time; see jobs/list-recent-attempt-reports.ts).
 */
export function advisoryDismissals(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("advisory_dismissals")
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("advisory", "text", (c) => c.notNull())
        .addColumn("dismissed_by", "text", (c) => c.notNull().check(sql`length(dismissed_by) > 0`))
        .addColumn("dismissed_at", "text", timestamp("dismissed_at"))
        .addPrimaryKeyConstraint("advisory_dismissals_pk", ["tenant_id", "repository", "advisory"])
        .execute();
      await db.schema
        .createIndex("jobs_by_repository")
        .on("jobs")
        .columns(["tenant_id", "repository", "accepted_at"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("jobs_by_repository").execute();
      await db.schema.dropTable("advisory_dismissals").execute();
    },
  };
}
