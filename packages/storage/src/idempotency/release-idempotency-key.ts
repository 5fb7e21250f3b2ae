import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Gives up a reservation after the operation failed unexpectedly (no receipt worth keeping), so
 * a retry with the same key proceeds at once instead of waiting out the reservation.
 * Fenced like completion: only the current holder's token deletes, and only while in flight.
 * Returns whether it did.
 */
export async function releaseIdempotencyKey(
  target: StorageOrTransaction,
  input: { tenantId: string; key: string; token: string },
): Promise<boolean> {
  const result = await executorOf(target)
    .deleteFrom("idempotency_keys")
    .where("tenant_id", "=", input.tenantId)
    .where("key", "=", input.key)
    .where("reservation_token", "=", input.token)
    .where("state", "=", "in_flight")
    .executeTakeFirst();
  return result.numDeletedRows === 1n;
}
