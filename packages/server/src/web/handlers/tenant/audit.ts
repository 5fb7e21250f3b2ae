import { listAuditEntries } from "@kiln/storage";
import { type Handler, principalOf } from "../../http/handler.js";
import { pageRequestOf } from "./page-request.js";

/** audit.list: the tenant's audit trail, newest first. */
export const listAudit: Handler<"audit.list"> = async (ctx) => {
  const page = await listAuditEntries(ctx.db, { tenantId: principalOf(ctx).tenantId, ...pageRequestOf(ctx.query) });
  return {
    entries: page.entries.map((e) => ({
      actor: e.actor,
      target: e.target,
      value: e.value,
      changed_at: e.changedAt,
      effective: e.effective,
    })),
    next_cursor: page.nextCursor,
  };
};
