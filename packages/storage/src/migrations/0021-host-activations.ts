import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * The host operator's activations (issue 18 item 5): one row per start of the host operator
 * on a boot, written with the readiness that start reported. `plan` and `ledger` hold the
 * steps it runs as it starts and each one's outcome as JSON text; `outcome`, `finished_at` and
 * `receipt_detail` are its receipt, null until it finished. `host_activations_host_written` is
 * what operator.hosts.activations.get reads: a host's activations, most recently written first.
 */
export function hostActivations(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("host_activations")
        .addColumn("operation", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("boot", "text", (c) => c.notNull())
        .addColumn("instance", "text", (c) => c.notNull())
        .addColumn("started_at", "text", timestamp("started_at"))
        .addColumn("plan", "text", (c) => c.notNull())
        .addColumn("ledger", "text", (c) => c.notNull())
        .addColumn("outcome", "text")
        .addColumn("finished_at", "text")
        .addColumn("receipt_detail", "text")
        .addColumn("written_at", "text", timestamp("written_at"))
        .execute();
      await db.schema
        .createIndex("host_activations_host_written")
        .on("host_activations")
        .columns(["host_id", "written_at", "operation"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("host_activations_host_written").execute();
      await db.schema.dropTable("host_activations").execute();
    },
  };
}
