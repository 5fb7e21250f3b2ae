import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * Canaries, host pinning and tenant anomaly flags (issue 18):
 *
 * - `jobs.pinned_host`: a job that only this host may claim (claim-next-job). Set at insert
 *   from the canary that reserved the job's submission key (insert-job.ts), never from a
 *   request body: only the platform pins.
 * - `canaries`: one row per canary the platform submitted (or tried to) — the host targeted,
 *   the slot it was due in (`due_at`, unique per host, so several kiln-servers running the
 *   canary loop submit one canary per host and slot), when it was submitted and the job it
 *   became (`job_id`, null while unsubmitted; `submission_error` when the API refused it). The
 *   canary's id is the job's submission key. Its verdict is derived from the job on read.
 * - `tenant_anomalies`: flags the anomaly rules raised, with their evidence (JSON) and the
 *   operator's disposition. (rule, tenant_id, subject) is unique, so a rule that sees the same
 *   thing again raises nothing new.
 * - `attempts_by_finished_at`, `jobs_by_accepted_at`: the rules read recently finished attempts
 *   and count recent submissions across tenants.
 */
export function canariesAndAnomalies(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("jobs").addColumn("pinned_host", "text").execute();

      await db.schema
        .createTable("canaries")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("host_id", "text", (c) => c.notNull())
        .addColumn("due_at", "text", timestamp("due_at"))
        .addColumn("created_at", "text", timestamp("created_at"))
        .addColumn("submitted_at", "text")
        .addColumn("job_id", "text")
        .addColumn("submission_error", "text")
        .execute();
      await db.schema
        .createIndex("canaries_by_host_slot")
        .on("canaries")
        .columns(["host_id", "due_at"])
        .unique()
        .execute();
      await db.schema.createIndex("canaries_by_job").on("canaries").column("job_id").execute();

      await db.schema
        .createTable("tenant_anomalies")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("rule", "text", (c) => c.notNull())
        .addColumn("subject", "text", (c) => c.notNull())
        .addColumn("job_id", "text")
        .addColumn("raised_at", "text", timestamp("raised_at"))
        .addColumn("evidence", "text", (c) => c.notNull())
        .addColumn("disposition", "text")
        .addColumn("disposition_note", "text")
        .addColumn("disposed_by", "text")
        .addColumn("disposed_at", "text")
        .execute();
      await db.schema
        .createIndex("tenant_anomalies_once")
        .on("tenant_anomalies")
        .columns(["rule", "tenant_id", "subject"])
        .unique()
        .execute();
      await db.schema.createIndex("tenant_anomalies_by_raised").on("tenant_anomalies").column("raised_at").execute();

      await db.schema.createIndex("attempts_by_finished_at").on("attempts").column("finished_at").execute();
      await db.schema.createIndex("jobs_by_accepted_at").on("jobs").column("accepted_at").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("jobs_by_accepted_at").execute();
      await db.schema.dropIndex("attempts_by_finished_at").execute();
      await db.schema.dropTable("tenant_anomalies").execute();
      await db.schema.dropTable("canaries").execute();
      await db.schema.alterTable("jobs").dropColumn("pinned_host").execute();
    },
  };
}
