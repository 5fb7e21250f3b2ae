import { randomBytes, randomUUID } from "node:crypto";

/** Person ids are opaque (`usr_` + 20 hex digits) so they never leak an email address. */
export function newPersonId(): string {
  return `usr_${randomBytes(10).toString("hex")}`;
}

/**
 * A reservation token names one holder of an idempotency key. It is the fence that
 * completion and release compare against, so it must never repeat.
 */
export function newReservationToken(): string {
  return randomUUID();
}

/** CLI token ids are public handles (`tok_` + 20 hex digits) for listing and revoking. */
export function newCliTokenId(): string {
  return `tok_${randomBytes(10).toString("hex")}`;
}

/** Session handles (`ses_` + 20 hex digits), never the cookie value. */
export function newSessionId(): string {
  return `ses_${randomBytes(10).toString("hex")}`;
}
