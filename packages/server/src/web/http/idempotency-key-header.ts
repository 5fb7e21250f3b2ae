import type { FastifyRequest } from "fastify";
import { refuse } from "../../domain/refusal.js";

const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;

/**
 * Exactly one `idempotency-key` header (spec, K). Node folds repeated headers into
 * one string, so the raw header list is counted instead.
 */
export function idempotencyKeyOf(request: FastifyRequest): string {
  const raw = request.raw.rawHeaders;
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]?.toLowerCase() === "idempotency-key") values.push(raw[i + 1] ?? "");
  }
  if (values.length !== 1) {
    refuse(
      "idempotency_key_required",
      values.length === 0 ? "this mutation needs an idempotency-key header" : "send exactly one idempotency-key header",
    );
  }
  const key = values[0] ?? "";
  if (!KEY_SHAPE.test(key)) {
    refuse("idempotency_key_required", "the idempotency-key header must be 1 to 255 printable ASCII characters");
  }
  return key;
}
