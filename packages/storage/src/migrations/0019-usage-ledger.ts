import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * What the usage ledger needs beyond what settlement writes (issue 16):
 *
 * - `usage_credits`: a credit an operator granted a tenant (operator.tenants.controls.set
 *   `changes.credit`), in vCPU-seconds and/or cents, with the reason and who granted it; the
 *   ledger lists it as an `operator_credit` adjustment in the month of `granted_at`.
 * - `lineage_storage_samples`: the bytes a tenant's live lineages of one repository held at one
 *   UTC hour (`hour`, `YYYY-MM-DDTHH`), written once an hour by the storage sampler; each sample
 *   stands for one hour held, so a day's byte-hours are the sum of its samples. The primary key
 *   makes a second server process's sample of the same hour a no-op.
 * - `source_upload_parts (tenant_id, received_at)`: the bandwidth check at every
 *   sources.chunk.put sums the tenant's parts of the month; this keeps that a range read.
 * - `attempts (started_at, job_id, number)`: the ledger's keyset order over metering records.
 *   Without it every export page scanned and sorted all attempts (bench/usage-export.mjs: 0.7 s a
 *   page at 100,000 records on SQLite); with it a page is a range read of `limit` rows.
 */
export function usageLedger(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("usage_credits")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("granted_at", "text", timestamp("granted_at"))
        .addColumn("vcpu_seconds", "bigint", (c) => c.notNull())
        .addColumn("amount_cents", "bigint", (c) => c.notNull())
        .addColumn("job", "text")
        .addColumn("reason", "text", (c) => c.notNull())
        .addColumn("granted_by", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("usage_credits_tenant_granted")
        .on("usage_credits")
        .columns(["tenant_id", "granted_at", "id"])
        .execute();
      await db.schema
        .createTable("lineage_storage_samples")
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("hour", "text", (c) => c.notNull())
        .addColumn("bytes", "bigint", (c) => c.notNull())
        .addPrimaryKeyConstraint("lineage_storage_samples_pk", ["tenant_id", "hour", "repository"])
        .execute();
      await db.schema
        .createIndex("source_upload_parts_tenant_received")
        .on("source_upload_parts")
        .columns(["tenant_id", "received_at"])
        .execute();
      await db.schema
        .createIndex("attempts_by_started")
        .on("attempts")
        .columns(["started_at", "job_id", "number"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("attempts_by_started").execute();
      await db.schema.dropIndex("source_upload_parts_tenant_received").execute();
      await db.schema.dropTable("lineage_storage_samples").execute();
      await db.schema.dropIndex("usage_credits_tenant_granted").execute();
      await db.schema.dropTable("usage_credits").execute();
    },
  };
}
