import type { Kysely, Migration } from "kysely";

/**
 * `webhook_deliveries.body_sha256`, unique: a delivery is also known by the SHA-256 of its signed
 * body. The delivery id (`X-GitHub-Delivery`) is a header the signature does not cover, so a
 * captured delivery replayed under a fresh id passed the primary key and was applied again; the
 * body is what the provider signed, and it names its own moment (timestamps, the acting sender),
 * so two deliveries the provider really sent do not share one. Rows recorded before this column
 * keep it null (both engines let nulls repeat in a unique index).
 */
export function webhookDeliveryDigests(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable("webhook_deliveries").addColumn("body_sha256", "text").execute();
      await db.schema
        .createIndex("webhook_deliveries_body_sha256")
        .on("webhook_deliveries")
        .column("body_sha256")
        .unique()
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("webhook_deliveries_body_sha256").execute();
      await db.schema.alterTable("webhook_deliveries").dropColumn("body_sha256").execute();
    },
  };
}
