import { appendAuditEntry, listCliTokens, revokeCliToken } from "@kiln/storage";
import { refuse } from "../../../domain/refusal.js";
import { latestUse } from "../../auth/last-used-recorder.js";
import { type Handler, principalOf } from "../../http/handler.js";
import { pageRequestOf } from "./page-request.js";

/** cli_tokens.list: the calling person's own device tokens (never their values). */
export const listOwnCliTokens: Handler<"cli_tokens.list"> = async (ctx) => {
  const p = principalOf(ctx);
  const page = await listCliTokens(ctx.db, {
    tenantId: p.tenantId,
    personId: p.principal,
    ...pageRequestOf(ctx.query),
  });
  return {
    tokens: page.rows.map((t) => ({
      id: t.id,
      principal: t.person_id,
      requesting_host: t.requesting_host,
      created_at: t.created_at,
      // This process's uses not yet written count too, so a use shows at once.
      last_used_at: latestUse(t.last_used_at, ctx.deps.lastUsed?.pendingCliTokenUse(t.id)),
      revoked_at: t.revoked_at,
      revoked_by: t.revoked_by,
    })),
    next_cursor: page.nextCursor,
  };
};

/** cli_tokens.revoke: one of the person's own tokens; the next request presenting it is refused. */
export const revokeOwnCliToken: Handler<"cli_tokens.revoke"> = async (ctx) => {
  const p = principalOf(ctx);
  const id = ctx.params.id;
  const result = await revokeCliToken(ctx.db, { tenantId: p.tenantId, personId: p.principal, id }, ctx.clock.now());
  if (result.kind === "not_found") return refuse("not_found", `you have no live CLI token ${id}`);
  await appendAuditEntry(
    ctx.db,
    {
      tenantId: p.tenantId,
      actor: p.principal,
      target: `cli-token:${id}`,
      value: "revoked",
      effective: result.revokedAt,
    },
    ctx.clock.now(),
  );
  return { id, revoked_at: result.revokedAt, revoked_by: p.principal };
};
