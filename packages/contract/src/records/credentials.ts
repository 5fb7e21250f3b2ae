import { Type } from "@sinclair/typebox";
import { Closed, NextCursor, Nullable, Timestamp } from "../schema-helpers.js";
import { ScopeSchema } from "../scopes.js";

export const CREDENTIAL_NAME_PATTERN = "^[a-z0-9][a-z0-9-]{0,62}$";

export const Credential = Closed(
  "Credential",
  {
    name: Type.String({ pattern: CREDENTIAL_NAME_PATTERN }),
    principal: Type.String({ pattern: "^agent:[a-z0-9][a-z0-9-]{0,62}$", description: "`agent:<name>`." }),
    scopes: Type.Array(ScopeSchema),
    created_by: Type.String({ description: "Principal of the admin who minted it." }),
    created_at: Timestamp(),
    expires_at: Timestamp(),
    last_used_at: Nullable(Timestamp()),
    revoked_at: Nullable(Timestamp()),
    revoked_by: Nullable(Type.String()),
    requests_per_minute: Type.Integer({ minimum: 1 }),
  },
  { description: "An agent credential as listed; never carries the value." },
);

export const CredentialRequest = Closed("CredentialRequest", {
  name: Type.String({
    pattern: CREDENTIAL_NAME_PATTERN,
    description: "Unique among the tenant's live credentials.",
  }),
  scopes: Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true }),
  expires_in_seconds: Type.Integer({ minimum: 60, maximum: 31536000 }),
  requests_per_minute: Type.Optional(
    Nullable(Type.Integer({ minimum: 1, maximum: 100000 }), "Per-credential request limit; 600 when null or absent."),
  ),
});

export const CredentialIssued = Closed("CredentialIssued", {
  credential: Type.String({ description: "The credential value (`kiln_agent_…`), shown once and never again." }),
  view: Credential,
});

export const CredentialsPage = Closed("CredentialsPage", {
  credentials: Type.Array(Credential),
  next_cursor: NextCursor(),
});

export const CredentialRevocationReceipt = Closed("CredentialRevocationReceipt", {
  name: Type.String(),
  revoked_at: Timestamp(),
  revoked_by: Type.String(),
});
