import type { FastifyInstance } from "fastify";
import { Refusal } from "./refusal.js";

/**
 * JSON bodies: an empty body is no body (a keyed POST without a request record may
 * still send `content-type: application/json`). Raw bytes for source chunks arrive
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
    parseJson(request, body, (error, value) => {
      if (error !== null) done(new Refusal("invalid_request", "body is not valid JSON"), undefined);
      else done(null, value);
    });
  });
  app.addContentTypeParser("application/octet-stream", { parseAs: "buffer" }, (_request, body, done) => {
    done(null, body);
  });
}
