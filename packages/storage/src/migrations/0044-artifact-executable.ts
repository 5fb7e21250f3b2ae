import type { Kysely, Migration } from "kysely";

/**
 * `artifacts.executable`: whether the published file had its owner's execute bit in the target
 * directory (1) or not (0), so a download (`kiln cargo --artifact`, `kiln jobs artifacts
 * --download`) can keep the mode a built binary needs to run. Artifacts published before it: 0.
 */
export function artifactExecutable(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .alterTable("artifacts")
        .addColumn("executable", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("artifacts").dropColumn("executable").execute();
    },
  };
}
