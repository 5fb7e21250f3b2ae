import type { Storage } from "../dialect.js";
import { newReservationToken } from "../ids.js";
import type { IdempotencyKeysTable } from "../schema.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";

/**
 * Reserves an idempotency key before a keyed mutation performs its effect.
 *
 * Locking. No transaction and no explicit lock: every step is one statement that is atomic on
 * its own, and every write is conditional on what the caller last saw, so any interleaving of
 * any number of callers in any number of processes leaves exactly one holder.
 *
 * 1. `INSERT … ON CONFLICT (tenant_id, key) DO NOTHING` with a fresh token. The primary key
 *    decides the race for a new key: exactly one insert lands. (PostgreSQL makes a concurrent
 *    inserter wait for the first one's commit before it reports the conflict; SQLite's single
 *    writer lock serializes the statements.) If ours landed, we hold the key.
 * 2. Otherwise read the row and decide: replay a completed receipt, refuse a different request
 *    (`reused`), or report `in_flight` while the holder's reservation lasts.
 * 3. Two cases take the row over: the reservation lapsed (its holder died), or the whole receipt
 *    is past retention. The takeover is an `UPDATE … WHERE reservation_token = <seen token>
 *    AND state = <seen state>`, fenced on exactly the row version read in step 2. Every write
 *    to a row changes its token (reserve, take over) or its state (complete) or removes it
 *    (release, purge), so if anyone moved first the fence matches nothing and we start over
 *    from step 1. On PostgreSQL at READ COMMITTED, a second UPDATE blocked on the first's row
 *    lock re-checks its WHERE against the committed row, sees the new token, and updates nothing.
 *
 * Each retry of the loop means another caller made progress, so it ends quickly; the cap only
 * turns a bug into an error instead of a spin.
 *
 * Takes a `Storage`, not a transaction: a reservation only works once others can see it, so it
 * must commit before the effect starts. Complete it (possibly inside the effect's own
 * transaction) with `completeIdempotencyKey`, or give it up with `releaseIdempotencyKey`.
 */
export async function reserveIdempotencyKey(
  storage: Storage,
  input: ReserveIdempotencyKeyInput,
): Promise<ReserveIdempotencyKeyResult> {
  const { tenantId, key, now } = input;
  const db = storage.db;
  const nowText = formatTimestamp(now);

  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const reservation = newReservation(input);
    const inserted = await db
      .insertInto("idempotency_keys")
      .values({ tenant_id: tenantId, key, ...reservation, created_at: nowText })
      .onConflict((conflict) => conflict.columns(["tenant_id", "key"]).doNothing())
      .executeTakeFirst();
    if (inserted.numInsertedOrUpdatedRows === 1n) {
      return { kind: "reserved", token: reservation.reservation_token };
    }

    const existing = await db
      .selectFrom("idempotency_keys")
      .selectAll()
      .where("tenant_id", "=", tenantId)
      .where("key", "=", key)
      .executeTakeFirst();
    if (existing === undefined) {
      continue; // released or purged between the two statements: insert again
    }

    // Past retention the receipt no longer counts — unless someone still holds it (possible
    // only when the reservation outlasts retention, which no sane setting does).
    const pastRetention =
      existing.expires_at <= nowText && (existing.state === "completed" || existing.reserved_until <= nowText);
    if (!pastRetention) {
      if (existing.operation !== input.operation || existing.request_hash !== input.requestHash) {
        return { kind: "reused" };
      }
      if (existing.state === "completed") {
        return replayOf(existing);
      }
      if (existing.reserved_until > nowText) {
        return { kind: "in_flight", reservedUntil: existing.reserved_until };
      }
    }

    // Lapsed reservation, or a receipt past retention: replace it as if the key were new.
    const updated = await db
      .updateTable("idempotency_keys")
      .set({ ...reservation, ...(pastRetention ? { created_at: nowText } : {}) })
      .where("tenant_id", "=", tenantId)
      .where("key", "=", key)
      .where("reservation_token", "=", existing.reservation_token)
      .where("state", "=", existing.state)
      .executeTakeFirst();
    if (updated.numUpdatedRows === 1n) {
      return { kind: "reserved", token: reservation.reservation_token };
    }
  }
  throw new Error(`idempotency key ${key} kept changing during ${MAX_ATTEMPTS} reservation attempts`);
}

export interface ReserveIdempotencyKeyInput {
  tenantId: string;
  key: string;
  /** Operation identifier, e.g. `credentials.create`. */
  operation: string;
  /** Digest of the request body (and anything else that makes two requests "the same"). */
  requestHash: string;
  now: Date;
  /** How long a holder may take before another request may take the key over. Default 300. */
  reservationSeconds?: number;
  /** How long the receipt is kept, counted from the reservation. Default 86400. */
  retentionSeconds?: number;
}

export type ReserveIdempotencyKeyResult =
  /** The caller holds the key: perform the effect, then complete (or release) with `token`. */
  | { kind: "reserved"; token: string }
  /** The same request already completed: answer with its recorded response. */
  | { kind: "replay"; status: number; body: string }
  /** The key was used for a different operation or body within retention. */
  | { kind: "reused" }
  /** The same request is being performed by someone else until `reservedUntil`. */
  | { kind: "in_flight"; reservedUntil: string };

export const DEFAULT_RESERVATION_SECONDS = 300;
export const DEFAULT_RETENTION_SECONDS = 86_400;
const MAX_ATTEMPTS = 16;

/** The columns a new holder writes, whether inserting or taking over. */
function newReservation(input: ReserveIdempotencyKeyInput) {
  const { now, reservationSeconds = DEFAULT_RESERVATION_SECONDS, retentionSeconds = DEFAULT_RETENTION_SECONDS } = input;
  return {
    operation: input.operation,
    request_hash: input.requestHash,
    state: "in_flight",
    reservation_token: newReservationToken(),
    reserved_until: formatTimestamp(addSeconds(now, reservationSeconds)),
    response_status: null,
    response_body: null,
    expires_at: formatTimestamp(addSeconds(now, retentionSeconds)),
  } satisfies Partial<IdempotencyKeysTable>;
}

function replayOf(row: IdempotencyKeysTable): ReserveIdempotencyKeyResult {
  // The table's check constraint guarantees both are set on a completed row.
  if (row.response_status === null || row.response_body === null) {
    throw new Error(`completed idempotency key ${row.key} has no recorded response`);
  }
  return { kind: "replay", status: row.response_status, body: row.response_body };
}
