import { CATALOGUE } from "@kiln/contract";
import { listAudit } from "./audit.js";
import { createCredential, listCredentials, revokeCredential } from "./credentials.js";
import type { Handler, HandlerTable } from "./handler.js";
import { openapiDocument } from "./openapi-document.js";
import { refusePredecessorSubmission } from "./predecessor-submissions.js";

const predecessors: Record<string, Handler> = Object.fromEntries(
  CATALOGUE.filter((op) => op.deprecated === true).map((op) => [op.id, refusePredecessorSubmission]),
);

/** Operation id → handler; every catalogued id missing here answers not_implemented. */
export const defaultHandlers: HandlerTable = {
  "openapi.document": openapiDocument,
  ...predecessors,
  "credentials.create": createCredential,
  "credentials.list": listCredentials,
  "credentials.revoke": revokeCredential,
  "audit.list": listAudit,
};
