import {
  LEAST_ROLE_FOR_SCOPE,
  type Operation,
  type OperationId,
  operationById,
  type ParamsOf,
  type QueryOf,
  type ResponseDocumentOf,
} from "@kiln/contract";
import type { Db } from "@kiln/storage";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Principal } from "../../domain/identity/principal.js";
import { refuse } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import { type BoundHandler, boundHandlerOf, type HandlerTable, REPLY_SENT } from "../http/handler.js";
import { unrepresentableValue } from "../http/request-validators.js";

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
/** As the router validates path and query strings: converted to the schema's types, defaults filled in. */
const ajv = addFormats(new Ajv({ coerceTypes: "array", useDefaults: true, removeAdditional: false, strict: false }));
const validators = new Map<object, ValidateFunction>();
/** As the router validates a JSON body: its types as sent, never converted (request-validators.ts). */
const jsonAjv = addFormats(new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: false, strict: false }));
const bodyValidators = new Map<object, ValidateFunction>();

/** Validates a path or query part against the operation's schema, converted and defaulted as the router does. */
export function validate(
  schema: object | undefined,
  value: Record<string, unknown>,
  part: string,
): Record<string, unknown> {
  if (schema === undefined) return {};
  let check = validators.get(schema);
  if (check === undefined) {
    check = ajv.compile(schema);
    validators.set(schema, check);
  }
  const copy = { ...value };
  if (!check(copy)) {
    const error = check.errors?.[0];
    refuse(
      "invalid_request",
      `${part}${error?.instancePath.replaceAll("/", ".") ?? ""} ${error?.message ?? "is invalid"}`,
    );
  }
  return copy;
}

/**
 * Validates a page's JSON body against the operation's body schema as the router does: no
 * conversion, and no value nothing may carry (a NUL in text, a number past 2^53).
 */
export function validateBody(op: Operation, body: unknown): unknown {
  const part = op.request.body;
  if (part === undefined) return undefined;
  if (part.encoding !== "json") throw new Error(`${op.id} takes bytes; a page sends it no body`);
  let check = bodyValidators.get(part.schema);
  if (check === undefined) {
    check = jsonAjv.compile(part.schema);
    bodyValidators.set(part.schema, check);
  }
  const error = check(body) ? unrepresentableValue(body) : check.errors?.[0];
  if (error !== null && error !== undefined) {
    refuse("invalid_request", `body${error.instancePath.replaceAll("/", ".")} ${error.message ?? "is invalid"}`);
  }
  return body;
}

/**
 * The operation's bound handler once the person holds its scope — the check enforceSecurity
 * makes for a session (a missing role is `role_required`).
 */
export function authorizedHandler(ctx: PageContext, op: Operation): BoundHandler {
  const security = op.security;
  if (security.kind !== "tenant") throw new Error(`${op.id} is not a tenant operation`);
  if (!ctx.person.scopes.includes(security.scope)) {
    const role = LEAST_ROLE_FOR_SCOPE[security.scope];
    refuse("role_required", `${op.id} needs the ${role} role`, { role });
  }
  const handler = boundHandlerOf(ctx.handlers, op.id);
  if (handler === undefined)
    return refuse("not_implemented", `${op.id} is catalogued but not served by this build yet`);
  return handler;
}

/** Where a page is rendered: the app's dependencies and handler table, the signed-in person, the request. */
export interface PageContext {
  readonly deps: AppDeps;
  readonly handlers: HandlerTable;
  readonly person: Principal;
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
}

/**
 * Calls the operation's handler as the signed-in person with validated parts; what the
 * router's handler call is for a session (no idempotency: the caller wraps keyed mutations).
 */
export async function callAsPerson(
  ctx: PageContext,
  op: Operation,
  input: { params?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown },
  db: Db,
  idempotencyKey: string | null,
  afterCommit: (effect: () => void) => void,
): Promise<unknown> {
  const handler = authorizedHandler(ctx, op);
  const now = ctx.deps.clock.now();
  return handler({
    op,
    deps: ctx.deps,
    principal: ctx.person,
    operator: null,
    idempotencyKey,
    params: validate(op.request.params, input.params ?? {}, "params"),
    query: validate(op.request.query, input.query ?? {}, "query"),
    body: validateBody(op, input.body),
    db,
    now,
    clock: { now: () => new Date(now) },
    request: ctx.request,
    reply: ctx.reply,
    afterCommit,
  });
}

/**
 * Performs a tenant read operation in-process as the signed-in person, through the same
 * handler, input validation and scope check the HTTP route applies — the dashboard has no
 * second code path to the data. Only reads of JSON documents: mutations go through
 * performMutationAsPerson (idempotency, the cross-site check), bytes through sendBytesAsPerson.
 */
export async function performAsPerson<Id extends OperationId>(
  ctx: PageContext,
  id: Id,
  input: { params?: Partial<ParamsOf<Id>>; query?: Partial<QueryOf<Id>> },
): Promise<ResponseDocumentOf<Id>> {
  const op = operationById(id);
  if (op.method !== "GET" || op.keyed || op.response.encoding !== "json" || op.security.kind !== "tenant") {
    throw new Error(`${id} is not a tenant read a page may perform in-process`);
  }
  // A read has no transaction to wait for: effects it defers run once it returns.
  const effects: (() => void)[] = [];
  const result = await callAsPerson(
    ctx,
    op,
    input as Record<string, Record<string, unknown>>,
    ctx.deps.storage.db,
    null,
    (e) => effects.push(e),
  );
  for (const effect of effects) effect();
  if (result === REPLY_SENT) throw new Error(`${id} wrote the reply itself; a page cannot embed it`);
  return result as ResponseDocumentOf<Id>;
}

/**
 * Performs a tenant read answering bytes (an artifact download) as the signed-in person: the
 * handler writes the reply itself, exactly as it does on its API route.
 */
export async function sendBytesAsPerson<Id extends OperationId>(
  ctx: PageContext,
  id: Id,
  input: { params?: Partial<ParamsOf<Id>> },
): Promise<void> {
  const op = operationById(id);
  if (op.method !== "GET" || op.response.encoding !== "bytes" || op.security.kind !== "tenant") {
    throw new Error(`${id} is not a tenant read of bytes`);
  }
  const result = await callAsPerson(
    ctx,
    op,
    input as Record<string, Record<string, unknown>>,
    ctx.deps.storage.db,
    null,
    () => {},
  );
  if (result !== REPLY_SENT) throw new Error(`${id} answered without writing its bytes`);
}
