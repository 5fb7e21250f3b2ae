import { type Handler, REPLY_SENT } from "../../http/handler.js";
import { openApiDocumentText } from "../../http/openapi-document.js";

export const openapiDocument: Handler<"openapi.document"> = async ({ deps, reply }) => {
  await reply
    .code(200)
    .type("application/json; charset=utf-8")
    .header("cache-control", "public, max-age=300")
    .send(openApiDocumentText(deps.version));
  return REPLY_SENT;
};
