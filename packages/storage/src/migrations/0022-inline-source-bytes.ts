import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * `inline_source_bytes`: the source bytes each job submitted with an inline (schema_version 1)
 * source carried, written in the job's insert transaction, so a submission replayed by its
 * idempotency key (which finds its job and inserts nothing) is counted once. The bandwidth check
 * and usage's bytes uploaded sum these beside the uploaded parts of streamed archives;
 * `(tenant_id, received_at)` keeps the month's sum a range read, as for the parts (0019).
 */
export function inlineSourceBytes(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("inline_source_bytes")
        .addColumn("job_id", "text", (c) => c.primaryKey().references("jobs.id"))
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("submitted_by", "text", (c) => c.notNull())
        .addColumn("bytes", "bigint", (c) => c.notNull())
        .addColumn("received_at", "text", timestamp("received_at"))
        .execute();
      await db.schema
        .createIndex("inline_source_bytes_tenant_received")
        .on("inline_source_bytes")
        .columns(["tenant_id", "received_at", "job_id"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("inline_source_bytes_tenant_received").execute();
      await db.schema.dropTable("inline_source_bytes").execute();
    },
  };
}
