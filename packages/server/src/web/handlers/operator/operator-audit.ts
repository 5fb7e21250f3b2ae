import type { ParamsOf, ResponseDocumentOf } from "@kiln/contract";
import { appendOperatorAuditEntry, listOperatorAuditEntries, operatorAuditEntryExists } from "@kiln/storage";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type BaseContext, type Handler, operatorOf } from "../../http/handler.js";

function entryView(e: { sequence: number; actor: string; target: string; value: string; changedAt: string }) {
  let parsed: { operation?: string; outcome?: string; value?: string } = {};
  try {
    parsed = JSON.parse(e.value) as typeof parsed;
  } catch {
    parsed = { value: e.value };
  }
  return {
    sequence: e.sequence,
    actor: e.actor,
    operation: parsed.operation ?? "unknown",
    target: e.target,
    ...(parsed.value === undefined ? {} : { value: parsed.value }),
    ...(parsed.outcome === undefined ? {} : { outcome: parsed.outcome }),
    at: e.changedAt,
  };
}

async function allEntries(db: Parameters<typeof listOperatorAuditEntries>[0], most: number) {
  const out: ReturnType<typeof entryView>[] = [];
  let cursor: string | null = null;
  do {
    const page = await listOperatorAuditEntries(db, { limit: Math.min(1000, most - out.length), cursor });
    out.push(...page.entries.map(entryView));
    cursor = page.nextCursor;
  } while (cursor !== null && out.length < most);
  return out;
}

/** operator.audit.list: the newest thousand entries, newest first. */
export const listOperatorAudit: Handler<"operator.audit.list"> = async (ctx) => allEntries(ctx.db, 1000);

/** operator.audit.export: every entry, newest first. */
export const exportOperatorAudit: Handler<"operator.audit.export"> = async (ctx) =>
  allEntries(ctx.db, Number.MAX_SAFE_INTEGER);

/**
 * operator.audit.refuse_patch / refuse_delete: every attempt to edit or delete an entry
 * is refused and itself audited (the database refuses it too). An entry that does not
 * exist is a conflict, also audited.
 */
export const refuseOperatorAuditChange = async (
  ctx: BaseContext & { readonly params: ParamsOf<"operator.audit.refuse_patch" | "operator.audit.refuse_delete"> },
): Promise<ResponseDocumentOf<"operator.audit.refuse_patch">> => {
  const operator = operatorOf(ctx);
  const sequence = Number(ctx.params.sequence);
  const attempted = ctx.op.method === "PATCH" ? "PATCH" : "DELETE";
  const exists = (await operatorAuditEntryExists(ctx.db, sequence)) ? true : undefined;
  const recorded = await ctx.deps.storage.transaction((trx) =>
    appendOperatorAuditEntry(
      trx,
      {
        actor: operator.principal,
        target: `operator-audit:${sequence}`,
        value: operatorAuditValue(ctx.op.id, exists === undefined ? "conflict" : "refused", `${attempted} attempted`),
      },
      ctx.clock.now(),
    ),
  );
  if (exists === undefined)
    return refuse("conflict", `operator audit entry ${sequence} does not exist; entries are never edited or deleted`);
  return {
    sequence,
    attempted,
    refused: true,
    audit_sequence: recorded.sequence,
    attempted_by: operator.principal,
    attempted_at: recorded.changedAt,
  };
};
