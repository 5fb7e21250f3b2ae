import type { Kysely, Migration } from "kysely";

/**
 * Lineage seeding (issue 38): `lineages.seed_context`, what a lineage's dependency builds were
 * compiled with as its last save's job had them (job class: family, profile, toolchain; the
 * injected build settings; the cargo target and flags), so that a job whose lineage is new finds
 * the tenant's lineages it may start from with one indexed read (lineages/find-lineage-seeds.ts);
 * null for lineages saved before it was recorded (never a seed). And
 * `repository_settings.lineage_seeding` (0/1; null: the default, on).
 */
export function lineageSeeding(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("lineages").addColumn("seed_context", "text").execute();
      await db.schema
        .createIndex("lineages_by_seed_context")
        .on("lineages")
        .columns(["tenant_id", "host", "seed_context"])
        .execute();
      await db.schema.alterTable("repository_settings").addColumn("lineage_seeding", "integer").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("repository_settings").dropColumn("lineage_seeding").execute();
      await db.schema.dropIndex("lineages_by_seed_context").execute();
      await db.schema.alterTable("lineages").dropColumn("seed_context").execute();
    },
  };
}
