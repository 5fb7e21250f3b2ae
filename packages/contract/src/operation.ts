import type { TObject, TSchema } from "@sinclair/typebox";
import type { RefusalCode } from "./refusal-codes.js";
import type { Scope } from "./scopes.js";

export type HttpMethod = "GET" | "POST" | "DELETE" | "PATCH";

/**
 * Who may call an operation. The server enforces this from the catalogue alone;
 * no handler checks authorization by hand.
 */
export type Security =
  /** No credential (openapi.document, device.start, device.poll). */
  | { readonly kind: "public" }
  /** Only a signed-in human dashboard session (`kiln_session`); no bearer credential. */
  | { readonly kind: "session" }
  /**
   * A tenant bearer credential holding `scope`. `cookie`: a dashboard session cookie
   * alone also reaches it over HTTP (jobs.logs, jobs.logs_stream, usage.export).
   * `human`: only a person's CLI device token performs it (`human_principal_required`).
   */
  | { readonly kind: "tenant"; readonly scope: Scope; readonly cookie?: boolean; readonly human?: boolean }
  /** An operator session cookie (`kiln_operator_session`). */
  | { readonly kind: "operator" }
  /** The operator bootstrap credential as a bearer token (operator.session.create only). */
  | { readonly kind: "operator-bootstrap" };

export type RequestBody =
  | { readonly encoding: "json"; readonly schema: TSchema; readonly maxBytes?: number }
  /** Raw bytes (application/octet-stream) of at most maxBytes. */
  | { readonly encoding: "bytes"; readonly maxBytes: number; readonly description: string };

export type ResponseBody =
  | { readonly encoding: "json"; readonly schema: TSchema }
  | { readonly encoding: "bytes"; readonly contentType: string; readonly description: string }
  /** Server-sent events (text/event-stream); `event` describes one frame's data. */
  | { readonly encoding: "sse"; readonly description: string; readonly event: TSchema }
  | { readonly encoding: "none"; readonly description: string };

export interface Operation {
  /** The spec's identifier (`jobs.submit`); the identity in OpenAPI, MCP and CLI. */
  readonly id: string;
  readonly method: HttpMethod;
  /** OpenAPI-style path with `{param}` segments. */
  readonly path: string;
  readonly summary: string;
  readonly description?: string;
  readonly tag: string;
  readonly security: Security;
  readonly request: {
    readonly params?: TObject;
    readonly query?: TObject;
    readonly body?: RequestBody;
  };
  readonly response: ResponseBody;
  /** Every refusal code the spec lists for it, A and K expanded. */
  readonly refusals: readonly RefusalCode[];
  /** Keyed mutations require exactly one `idempotency-key` header. */
  readonly keyed: boolean;
  /**
   * How a keyed mutation reconciles repeats (spec, Errors): `receipt` (default) keeps the
   * answer 24 hours; `durable-owner` (job submission, source transfer) makes the key the
   * record's identity forever — an equal retry returns the original, changed input is
   * `conflict` — and the handler reconciles it.
   */
  readonly idempotency?: "receipt" | "durable-owner";
  readonly deprecated?: boolean;
  /**
   * A kiln operation the spec lacks (its tables list none of this id): the served document
   * marks it `x-kiln-extension` with why it exists. It may only add; a spec record's closed
   * shape is never changed for it.
   */
  readonly extension?: { readonly reason: string };
  /**
   * Response members that are secrets shown once (credentials.create's `credential`).
   * A keyed mutation's stored receipt never holds them: a replay carries a notice in
   * their place, so no secret sits in the idempotency store.
   */
  readonly shownOnce?: readonly string[];
  /** The MCP tool name and scope from the spec's MCP table, where it lists one. */
  readonly mcp?: { readonly tool: string; readonly scope: Scope };
}

/**
 * Checks an entry's shape, keeps its refusal list free of repeats and preserves its
 * literal types, so the typed client derives inputs and outputs from the catalogue.
 */
export function defineOperation<const T extends Operation>(op: T): T {
  return { ...op, refusals: [...new Set(op.refusals)] };
}

/** What every operator operation may refuse (spec: "Every operation below can refuse …"). */
export const OPERATOR_REFUSALS = ["operator_not_found", "unavailable"] as const satisfies readonly RefusalCode[];

/**
 * An operator-surface entry: operator session security, not keyed (spec: operator
 * mutations are audited and not keyed), and the refusals every operator operation gives
 * plus the row's extras.
 */
export function defineOperatorOperation<const T extends Omit<Operation, "security" | "keyed" | "refusals">>(
  op: T & { readonly extraRefusals?: readonly RefusalCode[] },
) {
  const { extraRefusals = [], ...rest } = op;
  return defineOperation({
    ...rest,
    security: { kind: "operator" },
    keyed: false,
    refusals: [...OPERATOR_REFUSALS, ...extraRefusals],
  } as const);
}

/**
 * Every refusal an operation can actually give: the spec's list, plus invalid_request
 * wherever a request part is validated against a schema (a request that fails its
 * schema is always invalid_request, even where the spec's row omits it), plus
 * not_implemented while its feature has not landed. The served document lists these;
 * `x-kiln-refusals` keeps the spec's own list.
 */
export function possibleRefusals(op: Operation): readonly RefusalCode[] {
  const validated = op.request.params !== undefined || op.request.query !== undefined || op.request.body !== undefined;
  return [
    ...new Set<RefusalCode>([...op.refusals, ...(validated ? (["invalid_request"] as const) : []), "not_implemented"]),
  ];
}
