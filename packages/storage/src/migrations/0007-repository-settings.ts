import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * A repository's settings as written through repositories.settings.write: one row per
 * repository, created by its first write (until then every value is the platform default at
 * version 0). `version` is the compare-and-set token a write must name; a null value means
 * "the platform default", so a changed default reaches every repository that never set it.
 */
export function repositorySettings(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("repository_settings")
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("version", "integer", (c) => c.notNull())
        .addColumn("affected_tests", "integer")
        .addColumn("total_injection_opt_out", "integer")
        .addColumn("wall_clock_ceiling_seconds", "integer")
        .addColumn("changed_by", "text", (c) => c.notNull())
        .addColumn("changed_at", "text", timestamp("changed_at"))
        .addPrimaryKeyConstraint("repository_settings_pk", ["tenant_id", "repository"])
        .addForeignKeyConstraint("repository_settings_repository_fk", ["tenant_id", "repository"], "repositories", [
          "tenant_id",
          "name",
        ])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("repository_settings").execute();
    },
  };
}
