import secureJson from "secure-json-parse";

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

/** A JSON body's text read: no body, a refusal's detail (invalid_request), or the value. */
export type JsonBodyText =
  | { readonly kind: "empty" }
  | { readonly kind: "refused"; readonly detail: string }
  | { readonly kind: "parsed"; readonly value: unknown };

/**
 * The one reading of a JSON body's text, on the event loop or in the body worker: an empty (or
 * all-whitespace) body is no body (a keyed POST without a request record may still send
 * `content-type: application/json`); a body nested deeper than MAX_JSON_DEPTH is refused before
 * it is parsed; `__proto__` and `constructor.prototype` members are refused (secure-json-parse,
 * as Fastify's own JSON parser with both set to "error"), as is text that is not JSON.
 */
export function readJsonBodyText(text: string): JsonBodyText {
  if (text.trim().length === 0) return { kind: "empty" };
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    return { kind: "refused", detail: `body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` };
  }
  try {
    return {
      kind: "parsed",
      value: secureJson.parse(text, undefined, { protoAction: "error", constructorAction: "error" }),
    };
  } catch {
    return { kind: "refused", detail: "body is not valid JSON" };
  }
}
