import {
  LEAST_ROLE_FOR_SCOPE,
  type OperationId,
  operationById,
  type ParamsOf,
  type QueryOf,
  type ResponseDocumentOf,
} from "@kiln/contract";
import { Ajv, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Principal } from "../auth/principal.js";
import type { AppDeps } from "../deps.js";
import { boundHandlerOf, type HandlerTable, REPLY_SENT } from "../handlers/handler.js";
import { refuse } from "../http/refusal.js";

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
/** As the router validates path and query strings: converted to the schema's types, defaults filled in. */
const ajv = addFormats(new Ajv({ coerceTypes: "array", useDefaults: true, removeAdditional: false, strict: false }));
const validators = new Map<object, ValidateFunction>();

function validate(schema: object | undefined, value: Record<string, unknown>, part: string): Record<string, unknown> {
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

/** Where a page is rendered: the app's dependencies and handler table, the signed-in person, the request. */
export interface PageContext {
  readonly deps: AppDeps;
  readonly handlers: HandlerTable;
  readonly person: Principal;
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
}

/**
 * Performs a tenant read operation in-process as the signed-in person, through the same
 * handler, input validation and scope check the HTTP route applies — the dashboard has no
 * second code path to the data. Only reads of JSON documents: mutations go through the API
 * routes themselves (their idempotency, CSRF and audit), from the page's forms and scripts.
 */
export async function performAsPerson<Id extends OperationId>(
  ctx: PageContext,
  id: Id,
  input: { params?: Partial<ParamsOf<Id>>; query?: Partial<QueryOf<Id>> },
): Promise<ResponseDocumentOf<Id>> {
  const op = operationById(id);
  const security = op.security;
  if (op.method !== "GET" || op.keyed || op.response.encoding !== "json" || security.kind !== "tenant") {
    throw new Error(`${id} is not a tenant read a page may perform in-process`);
  }
  if (!ctx.person.scopes.includes(security.scope)) {
    const role = LEAST_ROLE_FOR_SCOPE[security.scope];
    refuse("role_required", `${op.id} needs the ${role} role`, { role });
  }
  const handler = boundHandlerOf(ctx.handlers, id);
  if (handler === undefined) return refuse("not_implemented", `${id} is catalogued but not served by this build yet`);
  const now = ctx.deps.clock.now();
  // A read has no transaction to wait for: effects it defers run once it returns.
  const effects: (() => void)[] = [];
  const result = await handler({
    op,
    deps: ctx.deps,
    principal: ctx.person,
    operator: null,
    idempotencyKey: null,
    params: validate(op.request.params, (input.params ?? {}) as Record<string, unknown>, "params"),
    query: validate(op.request.query, (input.query ?? {}) as Record<string, unknown>, "query"),
    body: undefined,
    db: ctx.deps.storage.db,
    now,
    clock: { now: () => new Date(now) },
    request: ctx.request,
    reply: ctx.reply,
    afterCommit: (effect) => effects.push(effect),
  });
  for (const effect of effects) effect();
  if (result === REPLY_SENT) throw new Error(`${id} wrote the reply itself; a page cannot embed it`);
  return result as ResponseDocumentOf<Id>;
}
