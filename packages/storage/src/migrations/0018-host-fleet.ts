import { type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";
import { timestamp } from "./0001-initial-schema.js";

/**
 * The operator's fleet operations (issue 17 item 5):
 *
 * - `host_transitions`: every recorded change of a host (drain, undrain, deployment,
 *   initialization started and finished), with who, when and the revision it moved the host to;
 *   `operator.hosts.history` reads it. `sequence` orders entries that share an instant.
 * - `host_initializations`: one row per initialization an operator started, with its step
 *   ledger (JSON) as the host reported it. The host runs the steps; the control plane records.
 * - `host_receipts`: what a host operation finished with — a deployment, an initialization, a
 *   placement reap — with its entries (JSON); `operator.placements.receipt` pages a reap's.
 * - `host_reads`: an operator's read of a host's journal, kernel log or an evidence file, waiting
 *   for the host to answer on its next fleet poll; the answer (base64) is held until the
 *   waiting request takes it, then cleared (`delivered`), or the wait expires (`expired`).
 * - `hosts.deployed_release*`: the release an operator registered as running on the host.
 * - `hosts.reported_attempts`, `hosts.reported_at`: the attempts the host last said it runs
 *   sandboxes for (JSON array of attempt ids) and when, so a sandbox with no live attempt
 *   shows as an orphaned placement.
 */
export function hostFleet(dialect: DialectName): Migration {
  const hostColumns = [
    "deployed_release",
    "deployed_release_sha256",
    "deployed_at",
    "reported_attempts",
    "reported_at",
  ] as const;
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      const transitions = db.schema.createTable("host_transitions");
      await (dialect === "sqlite"
        ? transitions.addColumn("sequence", "integer", (c) => c.primaryKey().autoIncrement())
        : transitions.addColumn("sequence", "bigint", (c) => c.primaryKey().generatedAlwaysAsIdentity())
      )
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("from_state", "text", (c) => c.notNull())
        .addColumn("to_state", "text", (c) => c.notNull())
        .addColumn("action", "text", (c) => c.notNull())
        .addColumn("actor", "text", (c) => c.notNull())
        .addColumn("at", "text", timestamp("at"))
        .addColumn("reason", "text")
        .addColumn("revision", "integer")
        .execute();
      await db.schema.createIndex("host_transitions_host").on("host_transitions").column("host_id").execute();

      await db.schema
        .createTable("host_initializations")
        .addColumn("operation", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        // The host's 1st, 2nd, … initialization: orders two started within one millisecond.
        .addColumn("ordinal", "integer", (c) => c.notNull())
        .addColumn("state", "text", (c) =>
          c.notNull().check(sql`state in ('pending', 'running', 'succeeded', 'failed')`),
        )
        .addColumn("toolchains", "text", (c) => c.notNull())
        .addColumn("started_by", "text", (c) => c.notNull())
        .addColumn("started_at", "text", timestamp("started_at"))
        .addColumn("finished_at", "text")
        .addColumn("failure", "text")
        .addColumn("steps", "text", (c) => c.notNull())
        .addColumn("note", "text")
        .execute();
      await db.schema
        .createIndex("host_initializations_host")
        .on("host_initializations")
        .columns(["host_id", "ordinal"])
        .unique()
        .execute();
      // At most one open initialization per host: a second start's insert does nothing.
      await sql`create unique index host_initializations_open on host_initializations (host_id)
        where state in ('pending', 'running')`.execute(db);

      const receipts = db.schema.createTable("host_receipts");
      // `sequence` orders receipts recorded within one millisecond (newest first).
      await (dialect === "sqlite"
        ? receipts.addColumn("sequence", "integer", (c) => c.primaryKey().autoIncrement())
        : receipts.addColumn("sequence", "bigint", (c) => c.primaryKey().generatedAlwaysAsIdentity())
      )
        .addColumn("id", "text", (c) => c.notNull().unique())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("job_id", "text")
        .addColumn("vm_id", "text")
        .addColumn("actor", "text", (c) => c.notNull())
        .addColumn("at", "text", timestamp("at"))
        .addColumn("summary", "text", (c) => c.notNull())
        .addColumn("entries", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("host_receipts_host").on("host_receipts").columns(["host_id", "at"]).execute();
      await db.schema
        .createIndex("host_receipts_placement")
        .on("host_receipts")
        .columns(["job_id", "vm_id", "kind"])
        .execute();

      await db.schema
        .createTable("host_reads")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("path", "text")
        .addColumn("max_bytes", "integer", (c) => c.notNull())
        .addColumn("attempt", "integer")
        .addColumn("executions", "integer")
        .addColumn("requested_by", "text", (c) => c.notNull())
        .addColumn("requested_at", "text", timestamp("requested_at"))
        .addColumn("state", "text", (c) =>
          c.notNull().check(sql`state in ('pending', 'answered', 'failed', 'delivered', 'expired')`),
        )
        .addColumn("answered_at", "text")
        .addColumn("content", "text")
        .addColumn("truncated", "integer")
        .addColumn("detail", "text")
        .addColumn("refusal", "text")
        .execute();
      await db.schema.createIndex("host_reads_pending").on("host_reads").columns(["host_id", "state"]).execute();

      // One column per statement: SQLite's ALTER TABLE adds one at a time.
      for (const name of hostColumns) await db.schema.alterTable("hosts").addColumn(name, "text").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const name of [...hostColumns].reverse()) await db.schema.alterTable("hosts").dropColumn(name).execute();
      await db.schema.dropIndex("host_reads_pending").execute();
      await db.schema.dropTable("host_reads").execute();
      await db.schema.dropIndex("host_receipts_placement").execute();
      await db.schema.dropIndex("host_receipts_host").execute();
      await db.schema.dropTable("host_receipts").execute();
      await db.schema.dropIndex("host_initializations_open").execute();
      await db.schema.dropIndex("host_initializations_host").execute();
      await db.schema.dropTable("host_initializations").execute();
      await db.schema.dropIndex("host_transitions_host").execute();
      await db.schema.dropTable("host_transitions").execute();
    },
  };
}
