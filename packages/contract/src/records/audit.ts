import { Type } from "@sinclair/typebox";
import { Closed, NextCursor, Timestamp } from "../schema-helpers.js";

export const AuditEntry = Closed(
  "AuditEntry",
  {
    actor: Type.String({ description: "Principal that made the change (user id or `agent:<name>`)." }),
    target: Type.String({ description: "What changed, e.g. `credential:ci-bot`." }),
    value: Type.String({ description: "The value recorded; never a secret." }),
    changed_at: Timestamp(),
    effective: Type.String({ description: "From when it applies (RFC 3339 or a phrase such as `next job`)." }),
  },
  { description: "An append-only audit entry." },
);

export const AuditPage = Closed("AuditPage", {
  entries: Type.Array(AuditEntry, { description: "Newest first." }),
  next_cursor: NextCursor(),
});
