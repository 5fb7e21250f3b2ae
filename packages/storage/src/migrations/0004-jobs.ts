import type { ColumnDefinitionBuilder, Kysely, Migration } from "kysely";
import type { DialectName } from "../dialect.js";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Jobs and their attempts, transitions, durable logs, tenant job events (the durable
 * sequence of cli.events), published artifacts and the hosts that run attempts.
 * Source and output bytes live in the blob store, addressed by SHA-256.
 */
export function jobs(dialect: DialectName): Migration {
  const serial = (c: ColumnDefinitionBuilder) =>
    dialect === "postgres" ? c.primaryKey().generatedAlwaysAsIdentity() : c.primaryKey().autoIncrement();
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("jobs")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("branch", "text", (c) => c.notNull())
        .addColumn("base_commit", "text", (c) => c.notNull())
        .addColumn("head_sha", "text")
        .addColumn("size", "text", (c) => c.notNull())
        .addColumn("class", "text", (c) => c.notNull())
        .addColumn("description", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("submitted_by", "text", (c) => c.notNull())
        .addColumn("submission_key", "text")
        .addColumn("request_hash", "text", (c) => c.notNull())
        .addColumn("invocation", "text", (c) => c.notNull())
        .addColumn("source_manifest", "text", (c) => c.notNull())
        .addColumn("wall_clock_seconds", "integer", (c) => c.notNull())
        .addColumn("max_attempts", "integer", (c) => c.notNull())
        .addColumn("attempts_started", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("accepted_at", "text", timestamp("accepted_at"))
        .addColumn("queued_at", "text", timestamp("queued_at"))
        .addColumn("started_at", "text")
        .addColumn("finished_at", "text")
        .addColumn("failure", "text")
        .addColumn("queue_annotation", "text")
        .addColumn("retry_of", "text")
        .addColumn("cancel_requested_at", "text")
        .addColumn("cancel_requested_by", "text")
        .addColumn("admitted", "text")
        .addColumn("usage", "text")
        .addColumn("settlement", "text")
        .execute();
      // The submission identity: one job per (tenant, idempotency key), durably.
      await db.schema
        .createIndex("jobs_submission")
        .on("jobs")
        .columns(["tenant_id", "submission_key"])
        .unique()
        .execute();
      await db.schema.createIndex("jobs_queue").on("jobs").columns(["status", "queued_at", "id"]).execute();
      await db.schema.createIndex("jobs_by_tenant").on("jobs").columns(["tenant_id", "accepted_at", "id"]).execute();

      await db.schema
        .createTable("job_transitions")
        .addColumn("job_id", "text", (c) => c.notNull().references("jobs.id"))
        .addColumn("position", "integer", (c) => c.notNull())
        .addColumn("from_status", "text")
        .addColumn("to_status", "text", (c) => c.notNull())
        .addColumn("at", "text", timestamp("at"))
        .addColumn("reason", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("job_transitions_pk", ["job_id", "position"])
        .execute();

      await db.schema
        .createTable("hosts")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("vcpus", "integer", (c) => c.notNull())
        .addColumn("memory_bytes", "bigint", (c) => c.notNull())
        .addColumn("isolation", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("enrolled_at", "text", timestamp("enrolled_at"))
        .addColumn("last_heartbeat_at", "text")
        .execute();

      await db.schema
        .createTable("attempts")
        .addColumn("job_id", "text", (c) => c.notNull().references("jobs.id"))
        .addColumn("number", "integer", (c) => c.notNull())
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("vcpus", "integer", (c) => c.notNull())
        .addColumn("lease_token", "text", (c) => c.notNull())
        .addColumn("lease_expires_at", "text", timestamp("lease_expires_at"))
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("started_at", "text", timestamp("started_at"))
        .addColumn("finished_at", "text")
        .addColumn("outcome", "text")
        .addColumn("exit_code", "integer")
        .addColumn("report", "text")
        .addColumn("cargo_output_sha256", "text")
        .addColumn("cargo_output_bytes", "bigint")
        .addPrimaryKeyConstraint("attempts_pk", ["job_id", "number"])
        .execute();
      await db.schema.createIndex("attempts_running").on("attempts").columns(["state", "lease_expires_at"]).execute();

      await db.schema
        .createTable("log_records")
        .addColumn("job_id", "text", (c) => c.notNull().references("jobs.id"))
        .addColumn("sequence", "integer", (c) => c.notNull())
        .addColumn("attempt", "integer", (c) => c.notNull())
        .addColumn("stream", "text", (c) => c.notNull())
        .addColumn("at", "text", timestamp("at"))
        .addColumn("text", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("log_records_pk", ["job_id", "sequence"])
        .execute();

      await db.schema
        .createTable("job_events")
        .addColumn("sequence", dialect === "postgres" ? "bigint" : "integer", serial)
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("job_id", "text", (c) => c.notNull())
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("previous_status", "text")
        .addColumn("at", "text", timestamp("at"))
        .execute();
      await db.schema.createIndex("job_events_by_tenant").on("job_events").columns(["tenant_id", "sequence"]).execute();

      await db.schema
        .createTable("artifacts")
        .addColumn("job_id", "text", (c) => c.notNull().references("jobs.id"))
        .addColumn("attempt", "integer", (c) => c.notNull())
        .addColumn("idx", "integer", (c) => c.notNull())
        .addColumn("path", "text", (c) => c.notNull())
        .addColumn("bytes", "bigint", (c) => c.notNull())
        .addColumn("sha256", "text", (c) => c.notNull())
        .addColumn("published_at", "text", timestamp("published_at"))
        .addColumn("expires_at", "text", timestamp("expires_at"))
        .addPrimaryKeyConstraint("artifacts_pk", ["job_id", "attempt", "idx"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const t of ["artifacts", "job_events", "log_records", "attempts", "hosts", "job_transitions", "jobs"]) {
        await db.schema.dropTable(t).execute();
      }
    },
  };
}
