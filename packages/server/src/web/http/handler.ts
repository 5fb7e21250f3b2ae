import type {
  BodyOf,
  Clock,
  IsKeyed,
  Operation,
  OperationId,
  ParamsOf,
  QueryOf,
  ResponseDocumentOf,
  WritesReply,
} from "@kiln/contract";
import type { Db } from "@kiln/storage";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { OperatorPrincipal, Principal } from "../../domain/identity/principal.js";
import type { AppDeps } from "./app-deps.js";
import type { ReceivedBytes } from "./received-bytes.js";

/** Returned by handlers of bytes and SSE operations that wrote the reply themselves. */
export const REPLY_SENT: unique symbol = Symbol("reply sent");

/**
 * What a handler of operation `Id` receives: its path parameters, query and body already
 * validated against the catalogue entry's schemas and typed from them, the caller, and the
 * transaction its idempotency receipt commits in.
 */
export interface HandlerContext<Id extends OperationId = OperationId> {
  readonly op: Operation;
  readonly deps: AppDeps;
  /** null only for public operations. */
  readonly principal: Principal | null;
  /** The idempotency-key of a keyed mutation (durable-owner handlers reconcile it). */
  readonly idempotencyKey: IsKeyed<Id> extends true ? string : null;
  /** Operator operations only. */
  readonly operator: OperatorPrincipal | null;
  readonly params: ParamsOf<Id>;
  readonly query: QueryOf<Id>;
  /** A bytes body arrives streamed to the blob store's staging directory (web/http/received-bytes.ts). */
  readonly body: BodyOf<Id> extends Buffer ? ReceivedBytes : BodyOf<Id>;
  /** For a keyed mutation, the transaction its idempotency receipt commits in. */
  readonly db: Db;
  readonly now: Date;
  /** A clock fixed at `now`, for storage verbs: one request sees one instant. */
  readonly clock: Pick<Clock, "now">;
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
  /**
   * Runs `effect` once the operation's writes are committed (for a keyed mutation, after its
   * receipt's transaction): what another process or loop may act on at once, such as waking
   * the scheduler, must not run before the row it would look for is visible.
   */
  readonly afterCommit: (effect: () => void) => void;
}

/**
 * What a handler of operation `Id` returns: its response document (nothing for a no-body
 * operation), or REPLY_SENT once it wrote the reply itself — always for bytes and SSE, and for a
 * JSON document it sends pre-serialized.
 */
export type HandlerResult<Id extends OperationId> =
  // biome-ignore lint/suspicious/noConfusingVoidType: a no-body operation's async handler returns nothing, typed void
  | (WritesReply<Id> extends true ? never : ResponseDocumentOf<Id> extends undefined ? void : ResponseDocumentOf<Id>)
  | typeof REPLY_SENT;

/** The implementation of one operation, typed from its catalogue entry; refusals are thrown as Refusal. */
export type Handler<Id extends OperationId> = (ctx: HandlerContext<Id>) => Promise<HandlerResult<Id>>;

/**
 * A handler as the router holds it: the router binds every operation in one loop from the
 * catalogue, so it sees each one's parts as validated JSON only; the per-operation types are
 * enforced where handlers are written (HandlerTable), not re-proved here.
 */
export type BoundHandler = (
  ctx: BaseContext & {
    readonly idempotencyKey: string | null;
    readonly params: unknown;
    readonly query: unknown;
    readonly body: unknown;
  },
) => Promise<unknown>;

/** Operation id → its handler; every catalogued id missing here answers not_implemented. */
export type HandlerTable = { readonly [Id in OperationId]?: Handler<Id> };

/**
 * The members of a handler's context that do not depend on which operation it serves: what
 * shared helpers (paging, repository paths) and handlers of several operations take.
 */
export type BaseContext = Omit<HandlerContext, "params" | "query" | "body" | "idempotencyKey">;

/**
 * The handler a table holds for a catalogued operation id, as the router calls it. The table is
 * typed per operation where it is written; the router meets each entry with its own
 * operation's validated parts, which is what that typing assumed.
 */
export function boundHandlerOf(table: HandlerTable, id: string): BoundHandler | undefined {
  return table[id as keyof HandlerTable] as BoundHandler | undefined;
}

/** The principal of an operation whose security guarantees one. */
export function principalOf(ctx: { readonly op: Operation; readonly principal: Principal | null }): Principal {
  if (ctx.principal === null) throw new Error(`${ctx.op.id} reached its handler without a principal`);
  return ctx.principal;
}

/** The operator of an operator operation. */
export function operatorOf(ctx: {
  readonly op: Operation;
  readonly operator: OperatorPrincipal | null;
}): OperatorPrincipal {
  if (ctx.operator === null) throw new Error(`${ctx.op.id} reached its handler without an operator session`);
  return ctx.operator;
}
