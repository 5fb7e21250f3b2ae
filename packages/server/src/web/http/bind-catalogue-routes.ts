import type { Readable } from "node:stream";
import { CATALOGUE, type Operation } from "@kiln/contract";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { OperatorPrincipal, Principal } from "../../domain/identity/principal.js";
import { refuse } from "../../domain/refusal.js";
import type { AppDeps } from "./app-deps.js";
import type { LargeBodies } from "./body-parsers.js";
import { isPreparedOperation } from "./body-preparations.js";
import { enforceSecurity } from "./enforce-security.js";
import { type BoundHandler, boundHandlerOf, type HandlerTable, REPLY_SENT } from "./handler.js";
import { idempotencyKeyOf } from "./idempotency-key-header.js";
import { declaresLargeBody } from "./large-request-admission.js";
import { performKeyed } from "./perform-keyed.js";
import { TenantTurns } from "./tenant-turns.js";

declare module "fastify" {
  interface FastifyRequest {
    kiln: {
      principal: Principal | null;
      operator: OperatorPrincipal | null;
      idempotencyKey: string | null;
      /** Runs `effect` once the response is done or the connection gone (at once if it already is). */
      whenClosed: (effect: () => void) => void;
    };
  }
}

/** `/api/jobs/{id}` → `/api/jobs/:id` */
export function fastifyPathOf(path: string): string {
  return path.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ":$1");
}

const notImplemented: BoundHandler = async (ctx) =>
  refuse("not_implemented", `${ctx.op.id} is catalogued but not served by this build yet`);

const JSON_TYPE = "application/json; charset=utf-8";

async function send(op: Operation, reply: FastifyReply, result: unknown): Promise<void> {
  if (result === REPLY_SENT) return;
  if (op.response.encoding === "none") {
    await reply.code(204).send();
    return;
  }
  await reply.code(200).type(JSON_TYPE).send(JSON.stringify(result));
}

/** `whenClosed` for one reply: effects registered before its close wait for it, later ones run at once. */
function whenClosedOf(reply: FastifyReply): (effect: () => void) => void {
  let closed = false;
  const effects: (() => void)[] = [];
  reply.raw.once("close", () => {
    closed = true;
    for (const effect of effects.splice(0)) effect();
  });
  return (effect) => {
    if (closed) effect();
    else effects.push(effect);
  };
}

/**
 * Binds every catalogued operation in one loop: validation from its schemas,
 * security from its catalogued security, idempotency from `keyed`. An operation
 * without a handler answers not_implemented (after its security holds). A large body of an
 * operation that may carry one is admitted against its tenant's bound once the caller is known
 * (large-request-admission.ts), before the body is read.
 */
export function bindCatalogueRoutes(
  app: FastifyInstance,
  deps: AppDeps,
  handlers: HandlerTable,
  large: LargeBodies,
): void {
  const ingress = large.ingress;
  const turns = new TenantTurns();
  app.decorateRequest("kiln", null as unknown as FastifyRequest["kiln"]);
  for (const op of CATALOGUE) {
    const handler = boundHandlerOf(handlers, op.id) ?? notImplemented;
    const body = op.request.body;
    app.route({
      method: op.method,
      url: fastifyPathOf(op.path),
      schema: {
        ...(op.request.params === undefined ? {} : { params: op.request.params }),
        ...(op.request.query === undefined ? {} : { querystring: op.request.query }),
        ...(body?.encoding === "json" ? { body: body.schema } : {}),
      },
      ...(body?.maxBytes === undefined ? {} : { bodyLimit: body.maxBytes }),
      config: { operation: op },
      // Who is calling is settled before the body is even parsed, so an unauthorized
      // caller learns nothing from validation.
      onRequest: async (request, reply) => {
        request.kiln = { principal: null, operator: null, idempotencyKey: null, whenClosed: whenClosedOf(reply) };
        const caller = await enforceSecurity(deps, op, request);
        request.kiln.principal = caller.principal;
        request.kiln.operator = caller.operator;
        if (op.keyed) request.kiln.idempotencyKey = idempotencyKeyOf(request);
        // A request of a tenant makes this process shared for the others' bodies (the bound's
        // unshared tenants aside: TenantIngress).
        if (caller.principal !== null) ingress?.served(caller.principal.tenantId);
        // A tenant's requests start one a turn of the event loop, so another's is never queued
        // behind a whole batch of them (tenant-turns.ts).
        if (caller.principal !== null) await turns.take(caller.principal.tenantId);
        if (
          isPreparedOperation(op.id) &&
          caller.principal !== null &&
          declaresLargeBody(request, large.thresholdBytes)
        ) {
          const release = large.admission.admit(caller.principal.tenantId, deps.clock.now(), op.id);
          // Until the answer is sent or the connection is gone, whichever comes first.
          reply.raw.once("close", release);
        }
      },
      // A body is read at its tenant's ingress rate while others are served, once the caller is known (onRequest).
      ...(body === undefined || ingress === null
        ? {}
        : {
            preParsing: async (request: FastifyRequest, _reply: unknown, payload: Readable) => {
              const principal = request.kiln.principal;
              return principal === null ? payload : ingress.shape(principal.tenantId, payload);
            },
          }),
      handler: async (request, reply) => {
        const now = deps.clock.now();
        const committed: (() => void)[] = [];
        const runCommitted = () => {
          for (const effect of committed) {
            try {
              effect();
            } catch (error) {
              request.log.error({ err: error, operation: op.id }, "an effect after commit failed");
            }
          }
        };
        const base = {
          op,
          deps,
          principal: request.kiln.principal,
          operator: request.kiln.operator,
          idempotencyKey: request.kiln.idempotencyKey,
          params: request.params ?? {},
          query: request.query ?? {},
          body: request.body,
          now,
          clock: { now: () => new Date(now) },
          request,
          reply,
          afterCommit: (effect: () => void) => committed.push(effect),
        };
        const key = request.kiln.idempotencyKey;
        const principal = request.kiln.principal;
        if (key === null || principal === null || op.idempotency === "durable-owner") {
          // Durable-owner operations reconcile their key themselves (ctx.idempotencyKey).
          const result = await handler({ ...base, db: deps.storage.db });
          runCommitted();
          await send(op, reply, result);
          return;
        }
        const outcome = await performKeyed(
          deps.storage,
          {
            tenantId: principal.tenantId,
            key,
            operation: op.id,
            request: { params: base.params, query: base.query, body: base.body },
            now,
            shownOnce: op.shownOnce ?? [],
          },
          async (db) => {
            const result = await handler({ ...base, db });
            return op.response.encoding === "none"
              ? { status: 204, body: "" }
              : { status: 200, body: JSON.stringify(result) };
          },
        );
        runCommitted();
        if (outcome.replayed) void reply.header("idempotent-replayed", "true");
        if (outcome.status === 204) await reply.code(204).send();
        else await reply.code(outcome.status).type(JSON_TYPE).send(outcome.body);
      },
    });
  }
}
