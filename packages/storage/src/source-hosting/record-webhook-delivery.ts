import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Records a webhook delivery by the provider's delivery id and its signed body's SHA-256; true
 * on its first arrival, false when either was recorded before (a redelivery, or a captured body
 * replayed under any id: the caller does nothing). Called in the transaction of the delivery's
 * effect, so the effect and its record commit together; on PostgreSQL a concurrent arrival of
 * the same id or body waits on the unique index until the first commits, then inserts nothing.
 */
export async function recordWebhookDelivery(
  target: StorageOrTransaction,
  input: { deliveryId: string; event: string; bodySha256: string },
  at: Date,
): Promise<boolean> {
  const inserted = await executorOf(target)
    .insertInto("webhook_deliveries")
    .values({
      delivery_id: input.deliveryId,
      event: input.event,
      outcome: "received",
      received_at: formatTimestamp(at),
      body_sha256: input.bodySha256,
    })
    // Either unique key: the delivery id or the body's digest.
    .onConflict((c) => c.doNothing())
    .executeTakeFirst();
  return inserted.numInsertedOrUpdatedRows === 1n;
}

/** What kiln did with a recorded delivery (an operator reading the table sees why it changed nothing). */
export async function settleWebhookDelivery(
  target: StorageOrTransaction,
  input: { deliveryId: string; outcome: string },
): Promise<void> {
  await executorOf(target)
    .updateTable("webhook_deliveries")
    .set({ outcome: input.outcome.slice(0, 1000) })
    .where("delivery_id", "=", input.deliveryId)
    .execute();
}

/** A recorded delivery's outcome, or undefined when none of that id arrived. */
export async function readWebhookDelivery(
  target: StorageOrTransaction,
  input: { deliveryId: string },
): Promise<{ event: string; outcome: string } | undefined> {
  return executorOf(target)
    .selectFrom("webhook_deliveries")
    .select(["event", "outcome"])
    .where("delivery_id", "=", input.deliveryId)
    .executeTakeFirst();
}
