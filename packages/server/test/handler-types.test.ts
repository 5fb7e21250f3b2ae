import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Handler, HandlerTable } from "../src/web/http/handler.js";

/**
 * Type tests: each `@ts-expect-error` below must be an error, or `tsc -b` (which builds the
 * tests before `npm test` runs them) fails with "Unused '@ts-expect-error' directive". They
 * prove the handler table is typed per operation from the catalogue.
 */

// A handler whose document lacks the response schema's required members is refused.
// @ts-expect-error: jobs.get must return a Job
export const wrongDocument: Handler<"jobs.get"> = async () => ({ id: "job" });

// A handler of a no-body operation may not return a document.
// @ts-expect-error: jobs.cancel answers a CancellationReceipt, not a number
export const wrongReceipt: Handler<"jobs.cancel"> = async () => 42;

// The body a handler receives is the operation's schema: reading a member it lacks is refused.
export const readsBody: Handler<"credentials.create"> = async (ctx) => {
  // @ts-expect-error: CredentialRequest has no member `scope`
  void ctx.body.scope;
  // A keyed operation's idempotency key is a string, never null.
  const key: string = ctx.idempotencyKey;
  void key;
  throw new Error("not called");
};

// A handler filed under another operation's id is refused.
export const table: HandlerTable = {
  // @ts-expect-error: a jobs.get handler is not a jobs.list handler
  "jobs.list": (async () => ({ id: "job" })) as Handler<"jobs.get">,
};

describe("handler types", () => {
  it("are checked by tsc when the tests are built (this file compiles only if every expected error is one)", () => {
    assert.equal(typeof wrongDocument, "function");
    assert.equal(typeof readsBody, "function");
  });
});
