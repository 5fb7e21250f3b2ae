/**
 * The one table of refusal codes → HTTP status (spec, Errors). Every refusal the
 * service renders goes through this table; a test checks each code is documented
 * and appears in the served OpenAPI document.
 */
export const REFUSAL_CODES = {
  unauthenticated: { status: 401, meaning: "No credential or session, or it did not verify." },
  credential_revoked: { status: 401, meaning: "The presented credential was revoked; names revoked_at." },
  credential_expired: { status: 401, meaning: "The presented credential passed its expiry; names expired_at." },
  out_of_scope: { status: 403, meaning: "The credential lacks the operation's scope; names the scope." },
  role_required: { status: 403, meaning: "The session role does not permit the operation; names the role." },
  human_principal_required: { status: 403, meaning: "A human act; no agent credential performs it." },
  session_required: { status: 403, meaning: "Performed only inside a signed-in session." },
  operator_controlled: { status: 403, meaning: "The setting changes only through the operator console." },
  not_found: { status: 404, meaning: "The record does not exist for the active tenant." },
  gone: { status: 410, meaning: "Retention expired; no longer served; retention is not extended." },
  invalid_request: { status: 400, meaning: "The request did not satisfy the schema or rules; detail names the field." },
  idempotency_key_required: {
    status: 400,
    meaning: "The mutation carried no idempotency-key header, or more than one.",
  },
  confirmation_required: { status: 400, meaning: "The mutation lacked the confirmation its consequence requires." },
  idempotency_key_reused: {
    status: 409,
    meaning: "The key was used with a different body inside the retention window.",
  },
  idempotency_key_in_flight: {
    status: 409,
    meaning: "The key's first request is still being performed; a repeat after it answers gets its receipt.",
  },
  stale_version: { status: 409, meaning: "A settings write named a moved-past version; names current_version." },
  conflict: { status: 409, meaning: "The record's state does not admit the mutation; detail names the state." },
  rate_limited: { status: 429, meaning: "The credential's request limit was reached; names reset_at." },
  unavailable: { status: 503, meaning: "A needed store or service did not answer; retry after the named interval." },
  legacy_unsupported: { status: 501, meaning: "The composed runtime does not serve the retained predecessor form." },
  upstream_failed: { status: 502, meaning: "A provider the operation depends on refused or failed." },
  operator_not_found: {
    status: 404,
    meaning: "The operator surface answers this to every caller without an operator session.",
  },
  /**
   * Not one of the spec's 22 codes: kiln answers it (501) for an operation whose
   * feature has not landed yet, naming the operation. It disappears once every
   * operation is implemented.
   */
  not_implemented: { status: 501, meaning: "The operation is catalogued but not yet served by this build." },
} as const satisfies Record<string, { status: number; meaning: string }>;

export type RefusalCode = keyof typeof REFUSAL_CODES;

/** The 22 codes the spec names, in the spec's order. */
export const SPEC_REFUSAL_CODES = (Object.keys(REFUSAL_CODES) as RefusalCode[]).filter((c) => c !== "not_implemented");

/** A: the authentication refusals every scoped tenant operation can give. */
export const A = [
  "unauthenticated",
  "credential_revoked",
  "credential_expired",
  "out_of_scope",
  "role_required",
  "rate_limited",
  "unavailable",
] as const satisfies readonly RefusalCode[];

/** K: the refusals of a keyed mutation. */
export const K = [
  "idempotency_key_required",
  "idempotency_key_reused",
  "idempotency_key_in_flight",
] as const satisfies readonly RefusalCode[];
