import type { Operation } from "@kiln/contract";
import type { Clock, Db } from "@kiln/storage";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { OperatorPrincipal, Principal } from "../auth/principal.js";
import type { AppDeps } from "../deps.js";

export interface HandlerContext {
  readonly op: Operation;
  readonly deps: AppDeps;
  /** null only for public operations. */
  readonly principal: Principal | null;
  /** The idempotency-key of a keyed mutation (durable-owner handlers reconcile it). */
  readonly idempotencyKey: string | null;
  /** Operator operations only. */
  readonly operator: OperatorPrincipal | null;
  readonly params: Record<string, unknown>;
  readonly query: Record<string, unknown>;
  readonly body: unknown;
  /** For a keyed mutation, the transaction its idempotency receipt commits in. */
  readonly db: Db;
  readonly now: Date;
  /** A clock fixed at `now`, for storage verbs: one request sees one instant. */
  readonly clock: Clock;
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
}

/** Returned by handlers of bytes and SSE operations that wrote the reply themselves. */
export const REPLY_SENT = Symbol("reply sent");

/**
 * A handler returns the operation's response document (JSON operations), undefined
 * (no-body operations) or REPLY_SENT; refusals are thrown as Refusal.
 */
export type Handler = (ctx: HandlerContext) => Promise<unknown>;

export type HandlerTable = Readonly<Record<string, Handler>>;

/** The principal of an operation whose security guarantees one. */
export function principalOf(ctx: HandlerContext): Principal {
  if (ctx.principal === null) throw new Error(`${ctx.op.id} reached its handler without a principal`);
  return ctx.principal;
}

/** The operator of an operator operation. */
export function operatorOf(ctx: HandlerContext): OperatorPrincipal {
  if (ctx.operator === null) throw new Error(`${ctx.op.id} reached its handler without an operator session`);
  return ctx.operator;
}
