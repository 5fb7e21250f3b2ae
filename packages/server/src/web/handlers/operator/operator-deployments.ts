import { randomUUID } from "node:crypto";
import { appendOperatorAuditEntry, registerHostDeployment } from "@kiln/storage";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";
import { inventoryView } from "./operator-hosts.js";

/**
 * operator.hosts.deployment.register: records the release (and its digest) an operator says now
 * runs on the host, moving the host's revision on, with a `deployment` transition and receipt;
 * its serving state is left as it stands. A named `expected_revision` that moved is `conflict`.
 * Audited, refusals included. An unknown host is `operator_not_found`.
 */
export const registerDeployment: Handler<"operator.hosts.deployment.register"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const hostId = ctx.params.id;
  const { release, release_sha256: sha256, expected_revision: expected, note } = ctx.body;
  const result = await ctx.deps.storage.transaction(async (trx) => {
    const r = await registerHostDeployment(trx, {
      hostId,
      release,
      sha256: sha256 ?? null,
      expectedRevision: expected ?? null,
      actor: operator.principal,
      action: ctx.op.id,
      reason: note ?? null,
      receiptId: `receipt-${randomUUID()}`,
      now: ctx.now,
    });
    if (r.kind !== "not_found") {
      const value =
        r.kind === "changed"
          ? `release ${release}${sha256 === undefined ? "" : ` sha256 ${sha256}`} registered`
          : `expected_revision ${expected} is not the current revision ${r.revision}`;
      await appendOperatorAuditEntry(
        trx,
        {
          actor: operator.principal,
          target: `host:${hostId}`,
          value: operatorAuditValue(ctx.op.id, r.kind === "changed" ? "performed" : "conflict", value),
        },
        ctx.now,
      );
    }
    return r;
  });
  switch (result.kind) {
    case "not_found":
      return refuse("operator_not_found", `no host ${hostId}`);
    case "conflict":
      return refuse(
        "conflict",
        `body.expected_revision ${expected} is not host ${hostId}'s current revision ${result.revision}; re-read and register again`,
      );
    case "changed":
      return inventoryView(result.host);
  }
};
