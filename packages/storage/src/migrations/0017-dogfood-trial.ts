import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * The dogfood trial (issue 19): what operators and the platform record about the trial. The
 * period itself (state, clock, windows, scorecard, beta decision) is never stored: it is
 * computed from these rows and the job ledger on every read, so it cannot drift from them.
 *
 * - `dogfood_gate_evidence`: verified evidence per entry-gate part, one row per (part,
 *   reference); a later reference for the same part renews it.
 * - `dogfood_gate_openings`: the one instant the gate opened (the seven-day clock's first start).
 * - `dogfood_incidents`: operator- and platform-recorded incidents with issue and resolution.
 * - `dogfood_maintenance`, `dogfood_interventions`, `dogfood_lifecycle_changes`, `dogfood_spend`.
 *
 * Booleans are integers 0/1 and run-record lists JSON text, the same on both engines.
 */
export function dogfoodTrial(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("dogfood_gate_evidence")
        .addColumn("part", "text", (c) => c.notNull())
        .addColumn("reference", "text", (c) => c.notNull())
        .addColumn("source", "text", (c) => c.notNull())
        .addColumn("expires_at", "text")
        .addColumn("detail", "text")
        .addColumn("produced_at", "text")
        .addColumn("verification", "text", (c) => c.notNull())
        .addColumn("recorded_by", "text", (c) => c.notNull())
        .addColumn("recorded_at", "text", timestamp("recorded_at"))
        .addPrimaryKeyConstraint("dogfood_gate_evidence_pk", ["part", "reference"])
        .execute();
      await db.schema
        .createTable("dogfood_gate_openings")
        // One row at most: the gate opens once; the primary key makes a racing second opening a no-op.
        .addColumn("gate", "text", (c) => c.primaryKey())
        .addColumn("opened_at", "text", timestamp("opened_at"))
        .addColumn("opened_by", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createTable("dogfood_incidents")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("class", "text", (c) => c.notNull())
        .addColumn("occurred_at", "text", timestamp("occurred_at"))
        .addColumn("service_blocking", "integer", (c) => c.notNull())
        .addColumn("detail", "text", (c) => c.notNull())
        .addColumn("records", "text", (c) => c.notNull())
        .addColumn("recorded_by", "text", (c) => c.notNull())
        .addColumn("recorded_at", "text", timestamp("recorded_at"))
        .addColumn("issue_number", "integer")
        .addColumn("issue_filed_at", "text")
        .addColumn("issue_recorded_by", "text")
        .addColumn("issue_recorded_at", "text")
        .addColumn("resolution_detail", "text")
        .addColumn("resolved_by", "text")
        .addColumn("resolved_at", "text")
        .execute();
      await db.schema
        .createTable("dogfood_maintenance")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("starts_at", "text", timestamp("starts_at"))
        .addColumn("ends_at", "text", timestamp("ends_at"))
        .addColumn("reason", "text", (c) => c.notNull())
        .addColumn("declared_by", "text", (c) => c.notNull())
        .addColumn("declared_at", "text", timestamp("declared_at"))
        .execute();
      await db.schema
        .createTable("dogfood_interventions")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("action", "text", (c) => c.notNull())
        .addColumn("routine", "integer", (c) => c.notNull())
        .addColumn("at", "text", timestamp("at"))
        .addColumn("records", "text", (c) => c.notNull())
        .addColumn("recorded_by", "text", (c) => c.notNull())
        .addColumn("recorded_at", "text", timestamp("recorded_at"))
        .execute();
      await db.schema
        .createTable("dogfood_lifecycle_changes")
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("identity", "text", (c) => c.notNull())
        .addColumn("at", "text", timestamp("at"))
        .addColumn("detail", "text", (c) => c.notNull())
        .addColumn("host", "text")
        .addColumn("recorded_by", "text", (c) => c.notNull())
        .addColumn("recorded_at", "text", timestamp("recorded_at"))
        .addPrimaryKeyConstraint("dogfood_lifecycle_changes_pk", ["kind", "identity"])
        .execute();
      await db.schema
        .createTable("dogfood_spend")
        .addColumn("month", "text", (c) => c.notNull())
        .addColumn("source", "text", (c) => c.notNull())
        .addColumn("amount_cents", "integer", (c) => c.notNull())
        .addColumn("recorded_by", "text", (c) => c.notNull())
        .addColumn("recorded_at", "text", timestamp("recorded_at"))
        .addPrimaryKeyConstraint("dogfood_spend_pk", ["month", "source"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const table of [
        "dogfood_spend",
        "dogfood_lifecycle_changes",
        "dogfood_interventions",
        "dogfood_maintenance",
        "dogfood_incidents",
        "dogfood_gate_openings",
        "dogfood_gate_evidence",
      ]) {
        await db.schema.dropTable(table).execute();
      }
    },
  };
}
