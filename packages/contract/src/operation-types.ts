import type { Static, TObject, TSchema } from "@sinclair/typebox";
import type { CatalogueEntry, OperationId } from "./catalogue.js";

/**
 * The types of each operation, derived from its catalogue entry: what a caller sends
 * (`InputOf`), what it gets back (`OutputOf`), and the parts a server handler receives
 * (`ParamsOf`, `QueryOf`, `BodyOf`) and returns (`ResultOf`). The catalogue is their only
 * source: the typed client, the server's handler table and the CLI read them all from here.
 */
export type EntryOf<Id extends OperationId> = Extract<CatalogueEntry, { id: Id }>;

/** All members optional? then the part itself may be omitted. */
type PartInput<Name extends string, S> = [S] extends [never]
  ? unknown
  : S extends TObject
    ? Partial<Static<S>> extends Static<S>
      ? { [K in Name]?: Static<S> }
      : { [K in Name]: Static<S> }
    : unknown;

type BodyInput<B> = [B] extends [never]
  ? unknown
  : B extends { encoding: "json"; schema: infer S extends TSchema }
    ? { body: Static<S> }
    : B extends { encoding: "bytes" }
      ? { body: Uint8Array }
      : unknown;

type RequestPart<Id extends OperationId, Part extends string> = EntryOf<Id>["request"] extends {
  [K in Part]: infer P;
}
  ? P
  : never;

/** Whether the operation is a keyed mutation (it needs exactly one idempotency key). */
export type IsKeyed<Id extends OperationId> = EntryOf<Id>["keyed"] extends true ? true : false;

/** A call's input: path params, query, body and (keyed mutations) the idempotency key. */
export type InputOf<Id extends OperationId> = PartInput<"params", RequestPart<Id, "params">> &
  PartInput<"query", RequestPart<Id, "query">> &
  BodyInput<RequestPart<Id, "body">> &
  (IsKeyed<Id> extends true ? { idempotencyKey: string } : unknown);

/** A call's result as the client returns it: the response document, bytes, the raw event stream, or nothing. */
export type OutputOf<Id extends OperationId> = EntryOf<Id>["response"] extends {
  encoding: "json";
  schema: infer S extends TSchema;
}
  ? Static<S>
  : EntryOf<Id>["response"] extends { encoding: "bytes" }
    ? Uint8Array
    : EntryOf<Id>["response"] extends { encoding: "sse" }
      ? Response
      : undefined;

/** The validated path parameters a handler receives (an empty record when the path has none). */
export type ParamsOf<Id extends OperationId> = [RequestPart<Id, "params">] extends [never]
  ? Record<string, never>
  : RequestPart<Id, "params"> extends TSchema
    ? Static<RequestPart<Id, "params">>
    : Record<string, never>;

/** The validated query a handler receives (defaults applied). */
export type QueryOf<Id extends OperationId> = [RequestPart<Id, "query">] extends [never]
  ? Record<string, never>
  : RequestPart<Id, "query"> extends TSchema
    ? Static<RequestPart<Id, "query">>
    : Record<string, never>;

/** The validated body a handler receives: the JSON document, the raw bytes, or nothing. */
export type BodyOf<Id extends OperationId> = [RequestPart<Id, "body">] extends [never]
  ? undefined
  : RequestPart<Id, "body"> extends { encoding: "json"; schema: infer S extends TSchema }
    ? Static<S>
    : RequestPart<Id, "body"> extends { encoding: "bytes" }
      ? Buffer
      : undefined;

/** What a JSON operation's handler returns: its response document; nothing for a no-body one. */
export type ResponseDocumentOf<Id extends OperationId> = EntryOf<Id>["response"] extends {
  encoding: "json";
  schema: infer S extends TSchema;
}
  ? Static<S>
  : EntryOf<Id>["response"] extends { encoding: "none" }
    ? undefined
    : never;

/** Whether the handler writes the reply itself (bytes and server-sent event operations). */
export type WritesReply<Id extends OperationId> = EntryOf<Id>["response"] extends { encoding: "bytes" | "sse" }
  ? true
  : false;
