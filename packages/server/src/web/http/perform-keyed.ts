import {
  completeIdempotencyKey,
  type Db,
  releaseIdempotencyKey,
  reserveIdempotencyKey,
  type Storage,
} from "@kiln/storage";
import { Refusal, refuse } from "../../domain/refusal.js";
import { requestHashOf } from "./request-hash.js";

export interface KeyedOutcome {
  readonly status: number;
  readonly body: string;
}

export const SHOWN_ONCE_NOTICE = "(shown once; a replay does not repeat it — revoke and mint a new one if it was lost)";

/** The receipt to keep: the answer with every shown-once member replaced by a notice. */
export function receiptOf(outcome: KeyedOutcome, shownOnce: readonly string[]): KeyedOutcome {
  if (shownOnce.length === 0 || outcome.status >= 400) return outcome;
  const document = JSON.parse(outcome.body) as Record<string, unknown>;
  for (const member of shownOnce) if (member in document) document[member] = SHOWN_ONCE_NOTICE;
  return { status: outcome.status, body: JSON.stringify(document) };
}

/**
 * Performs a general keyed mutation at most once per (tenant, key) (spec, Errors):
 * the first request reserves the key for five minutes and performs; its answer —
 * success or refusal — is kept 24 hours and replayed to repeats with the same
 * request; a different request under the key is idempotency_key_reused; a repeat
 * while the first is still performing is idempotency_key_in_flight.
 *
 * The effect and the receipt commit in one transaction, and completion is fenced on
 * the reservation token: if this reservation expired and another request took the
 * key over, completion fails and the effect rolls back, so a key never has two
 * effects. An unexpected failure releases the reservation so a retry can perform.
 */
export async function performKeyed(
  storage: Storage,
  input: {
    tenantId: string;
    key: string;
    operation: string;
    request: unknown;
    now: Date;
    shownOnce?: readonly string[];
  },
  perform: (db: Db) => Promise<KeyedOutcome>,
): Promise<KeyedOutcome & { replayed: boolean }> {
  const requestHash = requestHashOf(input.operation, input.request);
  const reservation = await reserveIdempotencyKey(storage, {
    tenantId: input.tenantId,
    key: input.key,
    operation: input.operation,
    requestHash,
    now: input.now,
  });
  switch (reservation.kind) {
    case "replay":
      return { status: reservation.status, body: reservation.body, replayed: true };
    case "reused":
      return refuse("idempotency_key_reused", "this idempotency-key was used with a different request");
    case "in_flight":
      return refuse(
        "idempotency_key_in_flight",
        "the first request with this idempotency-key is still being performed; repeat after it answers",
        { retry_after_seconds: 1 },
      );
    case "reserved":
      break;
  }
  const keyRef = { tenantId: input.tenantId, key: input.key, token: reservation.token };
  try {
    const outcome = await storage.transaction(async (trx) => {
      const result = await perform(trx);
      const receipt = receiptOf(result, input.shownOnce ?? []);
      if (!(await completeIdempotencyKey(trx, { ...keyRef, status: receipt.status, body: receipt.body }))) {
        throw new Error(`idempotency reservation for ${input.operation} was taken over before it completed`);
      }
      return result;
    });
    return { ...outcome, replayed: false };
  } catch (error) {
    if (error instanceof Refusal && error.code !== "unavailable") {
      // A refusal has no effect (its transaction rolled back); it is the key's answer.
      const refused = { status: error.status, body: JSON.stringify(error.toDocument()) };
      const record = error.recordRefusal;
      const completed = await storage.transaction(async (trx) => {
        await record?.(trx);
        return completeIdempotencyKey(trx, { ...keyRef, ...refused });
      });
      if (completed) return { ...refused, replayed: false };
    }
    await releaseIdempotencyKey(storage, keyRef);
    throw error;
  }
}
