import type { Kysely, Migration } from "kysely";

/**
 * Operator drain of hosts (issue 17, operator.hosts.drain / undrain):
 *
 * - `revision`: moves with every recorded change of the host (drain, undrain); undrain names
 *   it as the policy revision the operator read, so a moved-past one is a conflict.
 * - `drained_by`, `drained_at`, `drain_reason`: who drained the host, set while it is drained.
 * - `last_actor`, `last_action`, `last_at`, `last_reason`: the last recorded change.
 *
 * `hosts.state` keeps its two values: `serving`, and `draining` (placement stops; the claim
 * verb places nothing on such a host).
 */
export function hostDrain(): Migration {
  const columns: [string, "integer" | "text"][] = [
    ["drained_by", "text"],
    ["drained_at", "text"],
    ["drain_reason", "text"],
    ["last_actor", "text"],
    ["last_action", "text"],
    ["last_at", "text"],
    ["last_reason", "text"],
  ];
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      // One column per statement: SQLite's ALTER TABLE adds one at a time.
      await db.schema
        .alterTable("hosts")
        .addColumn("revision", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
      for (const [name, type] of columns) await db.schema.alterTable("hosts").addColumn(name, type).execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const [name] of [...columns].reverse()) await db.schema.alterTable("hosts").dropColumn(name).execute();
      await db.schema.alterTable("hosts").dropColumn("revision").execute();
    },
  };
}
