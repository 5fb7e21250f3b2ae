import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * A tenant's policy, in two rows of one tenant each, created by their first write (until then
 * version 0 and platform defaults):
 *
 * - `tenant_settings`, written by the tenant's admins (tenant.settings.write): the default job
 *   size, the sizes members may pick (JSON array), the default toolchain, the tenant's default
 *   wall-clock ceiling, artifact and log retention, and whether agents may submit. A null value
 *   is "the platform default".
 * - `tenant_controls`, written by the operator (operator.tenants.controls.set): concurrency
 *   (`max_running_jobs`, enforced by claim-next-job), the storage quota, the monthly bandwidth
 *   allowance, the rate card (JSON) and suspension. A null limit is the platform default.
 *
 * Each carries `version`, the compare-and-set token a write names, and the last change's
 * attribution.
 */
export function tenantPolicy(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("tenant_settings")
        .addColumn("tenant_id", "text", (c) => c.primaryKey().references("tenants.id"))
        .addColumn("version", "integer", (c) => c.notNull())
        .addColumn("default_size", "text")
        .addColumn("allowed_sizes", "text")
        .addColumn("default_toolchain", "text")
        .addColumn("wall_clock_ceiling_seconds", "integer")
        .addColumn("artifact_retention_days", "integer")
        .addColumn("log_retention_days", "integer")
        .addColumn("agents_may_submit", "integer")
        .addColumn("changed_by", "text", (c) => c.notNull())
        .addColumn("changed_at", "text", timestamp("changed_at"))
        .execute();
      await db.schema
        .createTable("tenant_controls")
        .addColumn("tenant_id", "text", (c) => c.primaryKey().references("tenants.id"))
        .addColumn("version", "integer", (c) => c.notNull())
        .addColumn("max_running_jobs", "integer")
        .addColumn("storage_quota_bytes", "bigint")
        .addColumn("bandwidth_bytes_per_month", "bigint")
        .addColumn("rate_card", "text")
        .addColumn("suspended", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("suspension_reason", "text")
        .addColumn("suspended_since", "text")
        .addColumn("changed_by", "text", (c) => c.notNull())
        .addColumn("changed_at", "text", timestamp("changed_at"))
        .execute();
      // claim-next-job counts a tenant's running jobs for every candidate it considers.
      await db.schema.createIndex("jobs_tenant_status").on("jobs").columns(["tenant_id", "status"]).execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("jobs_tenant_status").execute();
      await db.schema.dropTable("tenant_controls").execute();
      await db.schema.dropTable("tenant_settings").execute();
    },
  };
}
