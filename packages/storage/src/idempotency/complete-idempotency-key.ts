import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Records the response of a keyed mutation so repeats replay it.
 *
 * Fenced: the UPDATE matches only while `token` is still the key's reservation and the key is
 * still in flight. A holder whose reservation lapsed and was taken over (or released) gets
 * `false` and must not report its result as the key's receipt. Run it in the same transaction
 * as the effect when the effect is a database write, so the two commit or fail together.
 */
export async function completeIdempotencyKey(
  target: StorageOrTransaction,
  input: CompleteIdempotencyKeyInput,
): Promise<boolean> {
  const result = await executorOf(target)
    .updateTable("idempotency_keys")
    .set({ state: "completed", response_status: input.status, response_body: input.body })
    .where("tenant_id", "=", input.tenantId)
    .where("key", "=", input.key)
    .where("reservation_token", "=", input.token)
    .where("state", "=", "in_flight")
    .executeTakeFirst();
  return result.numUpdatedRows === 1n;
}

export interface CompleteIdempotencyKeyInput {
  tenantId: string;
  key: string;
  /** The token `reserveIdempotencyKey` returned. */
  token: string;
  /** HTTP status of the recorded response. */
  status: number;
  /** The response body, serialized. */
  body: string;
}
