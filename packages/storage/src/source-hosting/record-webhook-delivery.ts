import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Records a webhook delivery by the provider's delivery id; true on its first arrival, false
 * when it was recorded before (a redelivery or a replay: the caller does nothing). Called in the
 * transaction of the delivery's effect, so the effect and its record commit together; on
 * PostgreSQL a concurrent arrival of the same id waits on the primary key until the first
 * commits, then inserts nothing.
 */
export async function recordWebhookDelivery(
  target: StorageOrTransaction,
  input: { deliveryId: string; event: string },
  at: Date,
): Promise<boolean> {
  const inserted = await executorOf(target)
    .insertInto("webhook_deliveries")
    .values({
      delivery_id: input.deliveryId,
      event: input.event,
      outcome: "received",
      received_at: formatTimestamp(at),
    })
    .onConflict((c) => c.column("delivery_id").doNothing())
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
