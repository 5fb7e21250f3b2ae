import { Type } from "@sinclair/typebox";
import { REFUSAL_CODES } from "../refusal-codes.js";
import { Closed, Timestamp } from "../schema-helpers.js";
import { ScopeSchema } from "../scopes.js";

export const Refusal = Closed(
  "Refusal",
  {
    code: Type.Union(
      Object.keys(REFUSAL_CODES).map((c) => Type.Literal(c)),
      { description: "The refusal code; its HTTP status is fixed by the code." },
    ),
    status: Type.Integer({ description: "The HTTP status of the response." }),
    detail: Type.String({ description: "What was refused and why; names the field, state or operation." }),
    current_version: Type.Optional(Type.Integer({ description: "stale_version: the version to re-read." })),
    expired_at: Type.Optional(Timestamp("credential_expired: when the credential expired.")),
    reset_at: Type.Optional(Timestamp("rate_limited: when the request window resets.")),
    revoked_at: Type.Optional(Timestamp("credential_revoked: when the credential was revoked.")),
    retry_after_seconds: Type.Optional(Type.Integer({ minimum: 0, description: "Seconds to wait before retrying." })),
    role: Type.Optional(Type.String({ description: "role_required: the least role that permits the operation." })),
    scope: Type.Optional(ScopeSchema),
  },
  { description: "Every refusal is this closed JSON document." },
);
