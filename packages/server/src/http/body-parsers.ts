import type { FastifyInstance } from "fastify";
import { Refusal } from "./refusal.js";

/**
 * The deepest nesting of arrays and objects a JSON body may have. No operation's record nests
 * beyond a handful of levels; open members (a job's `invocation`) could otherwise carry
 * thousands, and everything that walks a body recursively (the idempotent request's hash,
 * JSON.stringify of what is stored) would overflow the stack on them.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether `text` nests arrays and objects deeper than `limit`: one pass over the characters,
 * outside string literals (a bracket inside a string does not nest). Runs before parsing, so a
 * deep body is refused without building it.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * JSON bodies: an empty body is no body (a keyed POST without a request record may
 * still send `content-type: application/json`); a body nested deeper than MAX_JSON_DEPTH is
 * invalid_request. Raw bytes for source chunks arrive
 * as a Buffer, capped by the route's bodyLimit.
 */
export function installBodyParsers(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    if (typeof body !== "string" || body.trim().length === 0) {
      done(null, undefined);
      return;
    }
    if (nestsDeeperThan(body, MAX_JSON_DEPTH)) {
      done(
        new Refusal("invalid_request", `body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`),
        undefined,
      );
      return;
    }
    parseJson(request, body, (error, value) => {
      if (error !== null) done(new Refusal("invalid_request", "body is not valid JSON"), undefined);
      else done(null, value);
    });
  });
  app.addContentTypeParser("application/octet-stream", { parseAs: "buffer" }, (_request, body, done) => {
    done(null, body);
  });
}
