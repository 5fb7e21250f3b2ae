import { type Db, readTenantControls } from "@kiln/storage";
import { refuse } from "../../../domain/refusal.js";
import {
  decodePosition,
  encodePosition,
  type LedgerPosition,
  periodOf,
  rateCardView,
  readLedgerPage,
  summarizeUsage,
} from "../../../domain/usage/usage-ledger.js";
import { type Handler, principalOf } from "../../http/handler.js";

/** The tenant's rate card (null when none is set, or the tenant has no controls row). */
async function rateCardOf(db: Db, tenantId: string) {
  return (await readTenantControls(db, { tenantId }))?.rateCard ?? null;
}

/**
 * usage.report: the month's usage per day and per repository with totals, derived from the
 * settled attempts, cancellations, operator credits, lineage storage samples and uploads as of now (domain/usage/usage-ledger.ts), priced under
 * the tenant's rate card where one is set.
 */
export const usageReport: Handler<"usage.report"> = async (ctx) => {
  const tenantId = principalOf(ctx).tenantId;
  const period = periodOf(ctx.query.period, ctx.now);
  const asOf = ctx.now.toISOString();
  const rateCard = await rateCardOf(ctx.db, tenantId);
  const summary = await summarizeUsage(ctx.db, { tenantId, period, asOf, rateCard });
  return {
    tenant: tenantId,
    period: period.period,
    as_of: asOf,
    rate_card: rateCardView(rateCard),
    days: summary.days,
    repositories: summary.repositories,
    totals: summary.totals,
  };
};

/**
 * usage.export: the ledger keyset-paged. The first page (no cursor) pins as_of and carries the
 * period's totals as of it; the cursor keeps as_of, so every page lists only what had settled by
 * then and the pages sum to those totals.
 */
export const usageExport: Handler<"usage.export"> = async (ctx) => {
  const tenantId = principalOf(ctx).tenantId;
  let position: LedgerPosition;
  if (ctx.query.cursor === undefined) {
    const period = periodOf(ctx.query.period, ctx.now);
    position = { phase: "attempts", asOf: ctx.now.toISOString(), period: period.period, cursor: null };
  } else {
    const decoded = decodePosition(ctx.query.cursor);
    if (decoded === null) return refuse("invalid_request", "query.cursor is not a cursor this export issued");
    if (ctx.query.period !== undefined && ctx.query.period !== decoded.period) {
      return refuse(
        "invalid_request",
        `query.period ${ctx.query.period} is not the period of query.cursor (${decoded.period}); omit it or start again`,
      );
    }
    position = decoded;
  }
  const period = periodOf(position.period, ctx.now);
  const rateCard = await rateCardOf(ctx.db, tenantId);
  const totals =
    ctx.query.cursor === undefined
      ? (await summarizeUsage(ctx.db, { tenantId, period, asOf: position.asOf, rateCard })).totals
      : null;
  const page = await readLedgerPage(ctx.db, {
    tenantId,
    period,
    position,
    limit: ctx.query.limit ?? 1000,
    rateCard,
  });
  return {
    tenant: tenantId,
    period: period.period,
    as_of: position.asOf,
    rate_card: rateCardView(rateCard),
    records: page.records,
    storage: page.storage,
    uploads: page.uploads,
    adjustments: page.adjustments,
    totals,
    next_cursor: page.next === null ? null : encodePosition(page.next),
  };
};
