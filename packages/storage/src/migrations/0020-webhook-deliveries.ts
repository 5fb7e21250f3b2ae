import type { Kysely, Migration } from "kysely";
import { timestamp } from "./0001-initial-schema.js";

/**
 * `webhook_deliveries`: every source-hosting webhook delivery kiln acted on, by the provider's
 * delivery id (`X-GitHub-Delivery`). The provider redelivers on request and on a failed answer,
 * and anyone who captured a signed delivery could replay it; the primary key makes the second
 * arrival of one delivery a no-op, decided in the same transaction as the delivery's effect.
 */
export function webhookDeliveries(): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("webhook_deliveries")
        .addColumn("delivery_id", "text", (c) => c.primaryKey())
        .addColumn("event", "text", (c) => c.notNull())
        .addColumn("outcome", "text", (c) => c.notNull())
        .addColumn("received_at", "text", timestamp("received_at"))
        .execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropTable("webhook_deliveries").execute();
    },
  };
}
