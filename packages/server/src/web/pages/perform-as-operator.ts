import {
  type BodyOf,
  type Operation,
  type OperationId,
  operationById,
  type ParamsOf,
  type QueryOf,
  type ResponseDocumentOf,
} from "@kiln/contract";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { OperatorPrincipal } from "../../domain/identity/principal.js";
import { Refusal, refuse } from "../../domain/refusal.js";
import { verifyOperatorCredential } from "../auth/operator-credential.js";
import type { AppDeps } from "../http/app-deps.js";
import { enforceSecurity, refuseCrossSite } from "../http/enforce-security.js";
import { boundHandlerOf, type HandlerTable, REPLY_SENT } from "../http/handler.js";
import { validate, validateBody } from "./perform-as-person.js";

/** Where an operator page is rendered: the app's dependencies and handlers, the request and its reply. */
export interface OperatorPageContext {
  readonly deps: AppDeps;
  readonly handlers: HandlerTable;
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
}

/** An operator read every page's session check is made as: a GET, so the check is the session's alone. */
const SESSION_PROBE = operationById("operator.platform.states");

/**
 * The operator whose `kiln_operator_session` cookie the request carries, or null: the router's
 * own check for an operator read (enforceSecurity), so a page reaches no one the API would not.
 * A tenant's `kiln_session` is not an operator session and never answers here; on a posted form
 * the check also refuses another site's post (refuseCrossSite looks at the request's method).
 */
export async function signedInOperator(deps: AppDeps, request: FastifyRequest): Promise<OperatorPrincipal | null> {
  try {
    return (await enforceSecurity(deps, SESSION_PROBE, request)).operator;
  } catch (error) {
    if (error instanceof Refusal) return null;
    throw error;
  }
}

/** Calls the operation's handler as the router does for its route, effects after commit included. */
async function callHandler(
  ctx: OperatorPageContext,
  op: Operation,
  operator: OperatorPrincipal | null,
  input: { params?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown },
): Promise<unknown> {
  const handler = boundHandlerOf(ctx.handlers, op.id);
  if (handler === undefined)
    return refuse("not_implemented", `${op.id} is catalogued but not served by this build yet`);
  const now = ctx.deps.clock.now();
  const committed: (() => void)[] = [];
  const result = await handler({
    op,
    deps: ctx.deps,
    principal: null,
    operator,
    // Operator operations are not keyed (spec: operator mutations are audited, not keyed).
    idempotencyKey: null,
    params: validate(op.request.params, input.params ?? {}, "params"),
    query: validate(op.request.query, input.query ?? {}, "query"),
    body: validateBody(op, input.body),
    db: ctx.deps.storage.db,
    now,
    clock: { now: () => new Date(now) },
    request: ctx.request,
    reply: ctx.reply,
    afterCommit: (effect) => committed.push(effect),
  });
  for (const effect of committed) {
    // As the API route: the operation committed; a failing after-commit effect is logged, not answered.
    try {
      effect();
    } catch (error) {
      ctx.request.log.error({ err: error, operation: op.id }, "an effect after commit failed");
    }
  }
  return result;
}

/**
 * Performs an operator operation in-process from an operator page, through the same pieces its
 * API route uses rather than a second path to the data: the router's security check for the
 * operation (the operator session, and for a mutation the cross-site check, refused
 * `operator_not_found` as the operator surface refuses every other caller), the router's input
 * validation, and the operation's handler with the operator as actor — so a drain from a page
 * is audited exactly as one from the API.
 */
export async function performAsOperator<Id extends OperationId>(
  ctx: OperatorPageContext,
  id: Id,
  input: { params?: Partial<ParamsOf<Id>>; query?: Partial<QueryOf<Id>>; body?: BodyOf<Id> } = {},
): Promise<ResponseDocumentOf<Id>> {
  const op = operationById(id);
  // A page embeds a JSON document or follows a no-body answer; bytes and streams write the reply themselves.
  if (op.security.kind !== "operator" || (op.response.encoding !== "json" && op.response.encoding !== "none")) {
    throw new Error(`${id} is not an operator operation a page may perform in-process`);
  }
  const { operator } = await enforceSecurity(ctx.deps, op, ctx.request);
  const result = await callHandler(ctx, op, operator, input as Record<string, Record<string, unknown>>);
  if (result === REPLY_SENT) throw new Error(`${id} wrote the reply itself; a page cannot embed it`);
  return result as ResponseDocumentOf<Id>;
}

/**
 * operator.session.create from the sign-in form: the credential arrives as a form field rather
 * than a bearer header, and is checked as enforceSecurity checks the bearer (by digest); the
 * form must come from kiln's own pages (a login CSRF would sign the browser in as the
 * attacker's operator). The handler opens the session, audits it and sets the cookie.
 */
export async function openOperatorSession(ctx: OperatorPageContext, credential: unknown): Promise<void> {
  const op = operationById("operator.session.create");
  refuseCrossSite(ctx.request, ctx.deps.publicOrigin, "operator_not_found");
  if (typeof credential !== "string" || !(await verifyOperatorCredential(ctx.deps.storage, credential.trim()))) {
    refuse("operator_not_found", "that is not the operator credential");
  }
  await callHandler(ctx, op, null, {});
}
