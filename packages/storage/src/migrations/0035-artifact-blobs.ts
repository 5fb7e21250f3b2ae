import { type Kysely, type Migration, sql } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * The artifact retention sweep (issue 16): expired artifacts' bytes are deleted, safely.
 *
 * - `artifact_blobs`: one row per digest ever published as an artifact, the record that
 *   publication, every blob writer and the sweep lock (artifact-blobs/). `state`:
 *   `held` (bytes kept; `touched_at` is the last time a publication or a put named the digest),
 *   `shared` (another kind of record — a job's source, a source part, Cargo output — names it:
 *   never swept), `deleting` (a sweep marked it at `marked_at` under `mark_token` and is deleting
 *   its bytes), `deleted` (bytes gone at `deleted_at`; kept as a tombstone, so a publication of
 *   the digest after its bytes were swept is told so, and a put brings it back to `held`).
 * - Rows for what was published before: every artifact digest `held`, touched at its latest
 *   publication, so the first sweep judges old artifacts like new ones.
 * - Indexes for the sweep's questions: live artifacts of a digest; Cargo output, source parts and
 *   the tenant chunk index of a digest (the other kinds sharing the blob namespace); held rows
 *   by age; stale marks.
 */
export function artifactBlobs(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("artifact_blobs")
        .addColumn("sha256", "text", (c) => c.primaryKey())
        .addColumn("state", "text", (c) => c.notNull().check(sql`state in ('held', 'shared', 'deleting', 'deleted')`))
        .addColumn("bytes", "bigint", (c) => c.notNull())
        .addColumn("touched_at", "text", timestamp("touched_at"))
        .addColumn("marked_at", "text")
        .addColumn("mark_token", "text")
        .addColumn("deleted_at", "text")
        .execute();
      await db.schema
        .createIndex("artifact_blobs_by_state")
        .on("artifact_blobs")
        .columns(["state", "touched_at"])
        .execute();
      await db.schema.createIndex("artifacts_by_sha256").on("artifacts").columns(["sha256", "expires_at"]).execute();
      await db.schema.createIndex("attempts_by_cargo_output").on("attempts").column("cargo_output_sha256").execute();
      await db.schema.createIndex("source_upload_parts_by_sha256").on("source_upload_parts").column("sha256").execute();
      await db.schema.createIndex("source_chunks_by_sha256").on("source_chunks").column("sha256").execute();
      await sql`
        insert into artifact_blobs (sha256, state, bytes, touched_at)
        select sha256, 'held', max(bytes), max(published_at) from artifacts group by sha256`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("source_chunks_by_sha256").execute();
      await db.schema.dropIndex("source_upload_parts_by_sha256").execute();
      await db.schema.dropIndex("attempts_by_cargo_output").execute();
      await db.schema.dropIndex("artifacts_by_sha256").execute();
      await db.schema.dropIndex("artifact_blobs_by_state").execute();
      await db.schema.dropTable("artifact_blobs").execute();
    },
  };
}
