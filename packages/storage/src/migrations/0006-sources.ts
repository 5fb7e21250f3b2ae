import { type ColumnDefinitionBuilder, type Kysely, type Migration, sql } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

const nullableTimestamp =
  (name: string) =>
  (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder =>
    c.check(sql`${sql.ref(name)} is null or ${sql.ref(name)} like '____-__-__T__:__:__.___Z'`);

/**
 * The streamed source archive transport.
 *
 * - `source_uploads`: one row per upload, keyed by tenant and upload id (the reservation's
 *   idempotency key, so the id is the upload's durable identity). It keeps the manifest as
 *   reserved, its canonical digest, the declared totals, the request hash a replay is compared
 *   with, the state (`reserved → verified | rejected`; "expired" is derived from expires_at),
 *   who completed it, the job that claimed it and when cleanup released its parts.
 * - `source_upload_parts`: the parts an upload holds, sent (`uploaded`) or attached from the
 *   tenant's store (`reused`). Their bytes are blobs named by the SHA-256.
 * - `source_chunks`: the part digests each tenant holds — the per-tenant dedupe index.
 *   Blobs are global and content-addressed; this table is what makes a chunk "present" for a
 *   tenant, so one tenant's bytes never answer another tenant's chunk check.
 */
export function sources(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("source_uploads")
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("upload", "text", (c) => c.notNull())
        .addColumn("repository", "text", (c) => c.notNull())
        .addColumn("reserved_by", "text", (c) => c.notNull())
        .addColumn("request_hash", "text", (c) => c.notNull())
        .addColumn("format_version", "integer", (c) => c.notNull())
        .addColumn("manifest", "text", (c) => c.notNull())
        .addColumn("manifest_sha256", "text", (c) => c.notNull())
        .addColumn("totals", "text", (c) => c.notNull())
        .addColumn("part_count", "integer", (c) => c.notNull())
        .addColumn("part_bytes", "bigint", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull().check(sql`state in ('reserved', 'verified', 'rejected')`))
        .addColumn("reserved_at", "text", timestamp("reserved_at"))
        .addColumn("expires_at", "text", timestamp("expires_at"))
        .addColumn("verified_at", "text", nullableTimestamp("verified_at"))
        .addColumn("completed_by", "text")
        .addColumn("rejection", "text")
        .addColumn("claimed_job", "text")
        .addColumn("claimed_at", "text", nullableTimestamp("claimed_at"))
        .addColumn("cleaned_at", "text", nullableTimestamp("cleaned_at"))
        .addPrimaryKeyConstraint("source_uploads_pk", ["tenant_id", "upload"])
        .execute();
      await db.schema
        .createIndex("source_uploads_unclaimed")
        .on("source_uploads")
        .columns(["tenant_id", "claimed_job", "cleaned_at"])
        .execute();
      await db.schema
        .createIndex("source_uploads_expiry")
        .on("source_uploads")
        .columns(["expires_at"])
        .where(sql.ref("cleaned_at"), "is", null)
        .execute();
      await db.schema
        .createTable("source_upload_parts")
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("upload", "text", (c) => c.notNull())
        .addColumn("part", "integer", (c) => c.notNull())
        .addColumn("sha256", "text", (c) => c.notNull())
        .addColumn("bytes", "integer", (c) => c.notNull())
        .addColumn("origin", "text", (c) => c.notNull().check(sql`origin in ('uploaded', 'reused')`))
        .addColumn("received_at", "text", timestamp("received_at"))
        .addPrimaryKeyConstraint("source_upload_parts_pk", ["tenant_id", "upload", "part"])
        .addForeignKeyConstraint("source_upload_parts_upload", ["tenant_id", "upload"], "source_uploads", [
          "tenant_id",
          "upload",
        ])
        .execute();
      await db.schema
        .createTable("source_chunks")
        .addColumn("tenant_id", "text", (c) => c.notNull().references("tenants.id"))
        .addColumn("sha256", "text", (c) => c.notNull())
        .addColumn("bytes", "integer", (c) => c.notNull())
        .addColumn("stored_at", "text", timestamp("stored_at"))
        .addPrimaryKeyConstraint("source_chunks_pk", ["tenant_id", "sha256"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("source_chunks").execute();
      await db.schema.dropTable("source_upload_parts").execute();
      await db.schema.dropTable("source_uploads").execute();
    },
  };
}
