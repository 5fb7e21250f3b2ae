import { InvalidCursorError } from "@kiln/storage";
import type { FastifyError, FastifyInstance, FastifyReply } from "fastify";
import { Refusal } from "../../domain/refusal.js";

interface AjvError {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
  /** With ajv's `verbose`: the refused value and the schema holding the failed keyword. */
  data?: unknown;
  parentSchema?: { description?: string };
}

const CONTEXT_NAMES: Record<string, string> = { body: "body", querystring: "query", params: "path", headers: "header" };

/** `body.scopes[0]` from ajv's `/scopes/0`, so the detail names the field. */
function fieldOf(context: string, error: AjvError): string {
  const segments = (error.instancePath ?? "").split("/").filter((s) => s.length > 0);
  const params = error.params ?? {};
  const extra =
    typeof params.missingProperty === "string"
      ? params.missingProperty
      : typeof params.additionalProperty === "string"
        ? params.additionalProperty
        : undefined;
  if (extra !== undefined) segments.push(extra);
  let field = CONTEXT_NAMES[context] ?? context;
  for (const s of segments) field += /^\d+$/.test(s) ? `[${s}]` : `.${s}`;
  return field;
}

const BRANCH_MISMATCH = new Set(["const", "required", "additionalProperties", "anyOf", "oneOf"]);

/**
 * The error worth naming. For a value refused by every branch of a union (anyOf), ajv lists
 * each branch's first error before the anyOf one; the branch that got furthest into the value
 * (deepest path, not merely the wrong `kind` or a missing member) is the one the caller meant.
 */
function mostTellingError(errors: readonly AjvError[]): AjvError | undefined {
  const union = errors.findIndex((e) => e.keyword === "anyOf");
  if (union <= 0) return errors[0];
  const depth = (e: AjvError) => (e.instancePath ?? "").split("/").length;
  const telling = errors.slice(0, union).filter((e) => !BRANCH_MISMATCH.has(e.keyword ?? ""));
  return telling.sort((a, b) => depth(b) - depth(a))[0] ?? errors[0];
}

/** Turns a schema validation failure into the detail of an invalid_request refusal. */
export function validationDetail(context: string, errors: readonly AjvError[]): string {
  const first = mostTellingError(errors);
  if (first === undefined) return `${CONTEXT_NAMES[context] ?? context}: invalid`;
  const field = fieldOf(context, first);
  const params = first.params ?? {};
  switch (first.keyword) {
    case "required":
      return `${field} is required`;
    case "additionalProperties":
      return `${field} is not a member of this record`;
    case "enum":
      return `${field} must be one of ${JSON.stringify(params.allowedValues)}`;
    case "pattern": {
      // Name the refused value and the rule in words rather than the regular expression.
      const rule = first.parentSchema?.description;
      if (typeof first.data !== "string" || rule === undefined) return `${field} ${first.message ?? "is invalid"}`;
      const value =
        first.data.length > 200 ? `${JSON.stringify(first.data.slice(0, 200))}…` : JSON.stringify(first.data);
      return `${field} ${value} does not have the required form: ${rule}`;
    }
    default:
      return `${field} ${first.message ?? "is invalid"}`;
  }
}

/**
 * The one place errors become responses. A Refusal renders as its document; schema
 * and parsing failures become invalid_request naming the field; anything else is
 * logged with its stack and answered without leaking stack, SQL or paths.
 */
export function installErrorBoundary(
  app: FastifyInstance,
  /**
   * The dashboard's page for a path nothing serves, given by the composition (the pages sit above
   * http); absent (the host listener), every unknown path answers the JSON refusal.
   */
  notFoundPage?: (reply: FastifyReply, path: string) => unknown,
): void {
  app.setErrorHandler(
    (error: FastifyError & { validationContext?: string; validation?: AjvError[] }, request, reply) => {
      let refusal: Refusal;
      if (error instanceof Refusal) refusal = error;
      else if (error instanceof InvalidCursorError) {
        refusal = new Refusal("invalid_request", "query.cursor is not a cursor this list issued");
      } else if (error.validation !== undefined) {
        refusal = new Refusal("invalid_request", validationDetail(error.validationContext ?? "body", error.validation));
      } else if (error.code === "FST_ERR_CTP_INVALID_JSON_BODY" || error.code === "FST_ERR_CTP_EMPTY_JSON_BODY") {
        refusal = new Refusal("invalid_request", "body is not valid JSON");
      } else if (error.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
        refusal = new Refusal(
          "invalid_request",
          `body exceeds the ${request.routeOptions.bodyLimit ?? "largest"} bytes this operation accepts`,
        );
      } else if (error.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") {
        refusal = new Refusal("invalid_request", "content-type is not accepted by this operation");
      } else if (error.code === "FST_ERR_CTP_INVALID_CONTENT_LENGTH") {
        refusal = new Refusal("invalid_request", "content-length does not match the body");
      } else {
        request.log.error({ err: error }, "unexpected failure");
        refusal = new Refusal(
          "unavailable",
          `the service could not perform this request (reference ${request.id}); retry shortly`,
          { retry_after_seconds: 1 },
        );
      }
      void sendRefusal(reply, refusal);
    },
  );

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split("?")[0] ?? "/";
    // A person's browser asking for a page nothing serves gets a page with the navigation; the
    // API's paths, and any client that does not ask for HTML, keep the JSON refusal.
    if (notFoundPage !== undefined && wantsPage(request.method, path, request.headers.accept)) {
      return notFoundPage(reply, path);
    }
    void sendRefusal(reply, new Refusal("not_found", `no operation at ${request.method} ${path}`));
  });
}

/** A browser's page request: GET or HEAD outside the API, asking for HTML. */
function wantsPage(method: string, path: string, accept: string | undefined): boolean {
  if (method !== "GET" && method !== "HEAD") return false;
  if (/^\/(api|operator\/api|host|webhooks)(\/|$)/.test(path)) return false;
  return accept?.includes("text/html") === true;
}

export function sendRefusal(reply: FastifyReply, refusal: Refusal) {
  const doc = refusal.toDocument();
  if (doc.retry_after_seconds !== undefined) void reply.header("retry-after", String(doc.retry_after_seconds));
  return reply.code(doc.status).type("application/json; charset=utf-8").send(JSON.stringify(doc));
}
