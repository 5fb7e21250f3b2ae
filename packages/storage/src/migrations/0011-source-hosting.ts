import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * The source-hosting app (a GitHub App): which tenant claimed which installation and the
 * repositories it covers, and one `check_runs` row per job submitted with `check.head_sha`,
 * the durable state of its `kiln` check run on the provider.
 *
 * - `app_installations`: the provider's installation id (decimal text: provider ids outgrow
 *   32 bits and PostgreSQL's int8 reads back as a string), the tenant holding it (one tenant
 *   per installation: the primary key), its account, state `active | suspended | deleted`,
 *   who claimed it and when.
 * - `installation_repositories`: the `owner/name`s the installation covers.
 * - `check_runs`: per job, the provider's check run id once created, the stage last reported
 *   (`none | queued | in_progress | completed | abandoned`), consecutive failures with the last
 *   error and when to try again, and a lease so one server process reports a job at a time.
 */
export function sourceHosting(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("app_installations")
        .addColumn("installation_id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("account", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("claimed_by", "text", (c) => c.notNull())
        .addColumn("claimed_at", "text", timestamp("claimed_at"))
        .addColumn("updated_at", "text", timestamp("updated_at"))
        .execute();
      await db.schema
        .createIndex("app_installations_tenant")
        .on("app_installations")
        .columns(["tenant_id", "installation_id"])
        .execute();
      await db.schema
        .createTable("installation_repositories")
        .addColumn("installation_id", "text", (c) => c.notNull().references("app_installations.installation_id"))
        .addColumn("repository", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("installation_repositories_pk", ["installation_id", "repository"])
        .execute();
      await db.schema
        .createTable("check_runs")
        .addColumn("job_id", "text", (c) => c.primaryKey().references("jobs.id"))
        .addColumn("check_run_id", "text")
        .addColumn("reported_stage", "text", (c) => c.notNull())
        .addColumn("failures", "integer", (c) => c.notNull())
        .addColumn("last_error", "text")
        .addColumn("next_attempt_at", "text")
        .addColumn("lease_until", "text")
        .addColumn("updated_at", "text", timestamp("updated_at"))
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("check_runs").execute();
      await db.schema.dropTable("installation_repositories").execute();
      await db.schema.dropTable("app_installations").execute();
    },
  };
}
