import { type Kysely, type Migration, sql } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Lineages as the control plane accounts for them: one row per tenant lineage (the host's
 * identity `lin_…` for tenant + repository + job class) with the bytes its last save held,
 * when a job last used it, the host holding it, its state (live, purged, evicted) and the
 * host-side generation of its last save (a purge or an eviction drops that generation and
 * every one descending from it; see lineages/record-lineage-save.ts).
 */
export function lineages(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("lineages")
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("lineage", "text", (c) => c.notNull())
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("class", "text", (c) => c.notNull())
        .addColumn("bytes", "bigint", (c) => c.notNull())
        .addColumn("last_used_at", "text", timestamp("last_used_at"))
        .addColumn("host", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull().check(sql`state in ('live', 'purged', 'evicted')`))
        .addColumn("generation", "integer", (c) => c.notNull())
        .addColumn("state_changed_at", "text", timestamp("state_changed_at"))
        .addPrimaryKeyConstraint("lineages_pk", ["tenant_id", "lineage"])
        .execute();
      await db.schema
        .createIndex("lineages_by_class")
        .on("lineages")
        .columns(["tenant_id", "repository", "class"])
        .unique()
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("lineages").execute();
    },
  };
}
