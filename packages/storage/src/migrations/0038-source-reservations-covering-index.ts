import type { Kysely, Migration } from "kysely";

/**
 * The tenant's source reservations (sources/upload-row.ts `tenantReservations`: the part bytes and
 * count of its unclaimed uploads, read by every sources.reserve) answered from an index alone.
 *
 * `source_uploads` keeps each upload's manifest (megabytes of JSON for tens of thousands of
 * files) before `part_bytes` in its rows, and SQLite reads a column past a large one by walking
 * that one's overflow pages: summing `part_bytes` over a tenant's 32 unclaimed uploads of
 * 40,000-file manifests read a quarter of a gigabyte, about 90 ms on the event loop every tenant
 * shares, per reservation (reliability trial T15). `source_uploads_unclaimed` gains `part_bytes`,
 * so the index covers the query and no row is read. PostgreSQL keeps large values out of line
 * (TOAST) and is not slowed, but the same index serves it.
 */
export function sourceReservationsCoveringIndex(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("source_uploads_unclaimed").execute();
      await db.schema
        .createIndex("source_uploads_unclaimed")
        .on("source_uploads")
        .columns(["tenant_id", "claimed_job", "cleaned_at", "part_bytes"])
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("source_uploads_unclaimed").execute();
      await db.schema
        .createIndex("source_uploads_unclaimed")
        .on("source_uploads")
        .columns(["tenant_id", "claimed_job", "cleaned_at"])
        .execute();
    },
  };
}
