import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Host impairment, incidents and recovery (issue 18, items 2–5):
 *
 * - `hosts` gains the host's admission (closed by an impairment, apart from the operator's
 *   drain so that neither overwrites the other's attribution), its host operation revision
 *   (moves with every recovery invocation, incident and admission change; a recovery
 *   invocation names it as `expected_revision`) and its recovery policy (`automatic`, null
 *   while none is set, with its own revision).
 * - `host_health_reports`: the newest health report a `kiln-host` sent (its liveness and the
 *   disk free under its data dir, a failed initialization step), one row per host.
 * - `host_operator_readiness`: the host operator's readiness as last recorded, one per host.
 * - `platform_anomalies`: what the impairment detector raised, with evidence and disposition.
 * - `host_incidents` and `host_incident_approvals`: incidents and the destructive steps approved.
 * - `host_recoveries` and `host_recovery_steps`: recovery operations (the invocation recorded
 *   with its surface, operator and request) and each one's step ledger.
 */
export function hostRecovery(): Migration {
  const hostColumns: [string, "integer" | "text"][] = [
    ["admission_closed_by", "text"],
    ["admission_closed_at", "text"],
    ["admission_closure_reason", "text"],
    ["recovery_policy_automatic", "integer"],
    ["recovery_policy_changed_by", "text"],
    ["recovery_policy_changed_at", "text"],
  ];
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      // One column per statement: SQLite's ALTER TABLE adds one at a time.
      for (const name of ["operation_revision", "recovery_policy_revision"]) {
        await db.schema
          .alterTable("hosts")
          .addColumn(name, "integer", (c) => c.notNull().defaultTo(0))
          .execute();
      }
      for (const [name, type] of hostColumns) await db.schema.alterTable("hosts").addColumn(name, type).execute();

      await db.schema
        .createTable("host_health_reports")
        .addColumn("host_id", "text", (c) => c.primaryKey())
        .addColumn("reported_at", "text", timestamp("reported_at"))
        .addColumn("disk_free_bytes", "bigint", (c) => c.notNull())
        .addColumn("disk_total_bytes", "bigint", (c) => c.notNull())
        .addColumn("failed_initialization_step", "text")
        .execute();

      await db.schema
        .createTable("host_operator_readiness")
        .addColumn("host_id", "text", (c) => c.primaryKey())
        .addColumn("instance", "text", (c) => c.notNull())
        .addColumn("started_at", "text", timestamp("started_at"))
        .addColumn("environment", "text", (c) => c.notNull())
        .addColumn("host_reported", "text", (c) => c.notNull())
        .addColumn("provisioning_bundle_sha256", "text", (c) => c.notNull())
        .addColumn("recovery_binding_loaded", "integer", (c) => c.notNull())
        .addColumn("installation", "text")
        .addColumn("provider_identity_readable", "integer", (c) => c.notNull())
        .addColumn("provider", "text", (c) => c.notNull())
        .addColumn("provider_service_name", "text", (c) => c.notNull())
        .addColumn("boot", "text", (c) => c.notNull())
        .addColumn("boot_since", "text", timestamp("boot_since"))
        .addColumn("recorded_at", "text", timestamp("recorded_at"))
        .execute();

      await db.schema
        .createTable("host_incidents")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("revision", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("opened_at", "text", timestamp("opened_at"))
        .addColumn("closed_at", "text")
        .addColumn("closed_by", "text")
        .addColumn("automatic_recoveries_spent", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("awaiting_operator", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("awaiting_reason", "text")
        .execute();
      await db.schema.createIndex("host_incidents_host").on("host_incidents").columns(["host_id", "state"]).execute();

      await db.schema
        .createTable("host_incident_approvals")
        .addColumn("incident_id", "text", (c) => c.notNull().references("host_incidents.id"))
        .addColumn("step", "text", (c) => c.notNull())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("approved_by", "text", (c) => c.notNull())
        .addColumn("approved_at", "text", timestamp("approved_at"))
        .addPrimaryKeyConstraint("host_incident_approvals_pk", ["incident_id", "step"])
        .execute();

      await db.schema
        .createTable("platform_anomalies")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("evidence", "text", (c) => c.notNull())
        .addColumn("raised_at", "text", timestamp("raised_at"))
        .addColumn("incident_id", "text", (c) => c.notNull().references("host_incidents.id"))
        .addColumn("disposition", "text")
        .addColumn("disposition_note", "text")
        .addColumn("disposed_by", "text")
        .addColumn("disposed_at", "text")
        .execute();
      await db.schema
        .createIndex("platform_anomalies_incident_kind")
        .on("platform_anomalies")
        .columns(["incident_id", "kind"])
        .unique()
        .execute();

      await db.schema
        .createTable("host_recoveries")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("incident_id", "text")
        .addColumn("request", "text", (c) => c.notNull())
        .addColumn("surface", "text", (c) => c.notNull())
        .addColumn("operator", "text", (c) => c.notNull())
        .addColumn("rescue_read", "integer", (c) => c.notNull())
        .addColumn("rescue_ssh_public_key", "text")
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("invoked_at", "text", timestamp("invoked_at"))
        .addColumn("holder", "text")
        .addColumn("claimed_at", "text")
        .addColumn("finished_at", "text")
        .addColumn("outcome_detail", "text")
        .execute();
      // A retry with the same request identifier replays the recorded invocation.
      await db.schema
        .createIndex("host_recoveries_request")
        .on("host_recoveries")
        .columns(["host_id", "request"])
        .unique()
        .execute();

      await db.schema
        .createTable("host_recovery_steps")
        .addColumn("recovery_id", "text", (c) => c.notNull().references("host_recoveries.id"))
        .addColumn("position", "integer", (c) => c.notNull())
        .addColumn("step", "text", (c) => c.notNull())
        .addColumn("destructive", "integer", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("started_at", "text")
        .addColumn("finished_at", "text")
        .addColumn("detail", "text")
        .addPrimaryKeyConstraint("host_recovery_steps_pk", ["recovery_id", "position"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const table of [
        "host_recovery_steps",
        "host_recoveries",
        "platform_anomalies",
        "host_incident_approvals",
        "host_incidents",
        "host_operator_readiness",
        "host_health_reports",
      ]) {
        await db.schema.dropTable(table).execute();
      }
      for (const [name] of [...hostColumns].reverse()) await db.schema.alterTable("hosts").dropColumn(name).execute();
      for (const name of ["recovery_policy_revision", "operation_revision"]) {
        await db.schema.alterTable("hosts").dropColumn(name).execute();
      }
    },
  };
}
