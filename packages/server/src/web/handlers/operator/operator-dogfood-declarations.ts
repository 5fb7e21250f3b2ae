import type { ResponseDocumentOf } from "@kiln/contract";
import {
  declareDogfoodMaintenance,
  listDogfoodMaintenance,
  listDogfoodSpend,
  recordDogfoodIntervention,
  recordDogfoodLifecycleChange,
  recordDogfoodSpend,
} from "@kiln/storage";
import { auditedRecording } from "../../../domain/dogfood/audited-recording.js";
import { loadTrial } from "../../../domain/dogfood/load-trial.js";
import { loadTrialLedger } from "../../../domain/dogfood/trial-ledger.js";
import { SPEND_PLAN_SOURCE } from "../../../domain/dogfood/trial-period.js";
import { trialTenantsOf } from "../../../domain/dogfood/trial-tenants.js";
import {
  interventionView,
  lifecycleChangeView,
  maintenanceView,
  spendView,
} from "../../../domain/dogfood/trial-views.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/**
 * What operators declare during the dogfood trial: maintenance (rule 11), interventions (a
 * routine one fails the period), lifecycle changes (rule 12) and spend (rule 13). Each is keyed
 * — maintenance and interventions by id, lifecycle changes by (kind, identity), spend by
 * (month, source) — so the same declaration again answers the recorded one and other content
 * under the same key is `conflict`. Every recording is audited.
 */

/** Rule 11: a maintenance interval is at most 24 hours. */
const MAINTENANCE_MAX_MS = 24 * 3600 * 1000;
const iso = (text: string) => new Date(text).toISOString();

/** operator.dogfood.maintenance.declare: at most 24 hours, declared before it begins. */
export const declareMaintenance: Handler<"operator.dogfood.maintenance.declare"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const startsAt = iso(ctx.body.starts_at);
  const endsAt = iso(ctx.body.ends_at);
  const length = Date.parse(endsAt) - Date.parse(startsAt);
  if (length <= 0) refuse("invalid_request", "ends_at must be after starts_at");
  if (length > MAINTENANCE_MAX_MS) {
    refuse(
      "invalid_request",
      `maintenance lasts at most 24 hours; ${startsAt} to ${endsAt} is ${length / 3_600_000} hours`,
    );
  }
  const known = (await listDogfoodMaintenance(ctx.db)).find((m) => m.id === ctx.body.id);
  if (known === undefined && Date.parse(startsAt) <= ctx.now.getTime()) {
    refuse(
      "invalid_request",
      `maintenance is declared before it begins; starts_at ${startsAt} is not after now (${ctx.now.toISOString()})`,
    );
  }
  const row = {
    id: ctx.body.id,
    starts_at: startsAt,
    ends_at: endsAt,
    reason: ctx.body.reason,
    declared_by: operator.principal,
    declared_at: ctx.now.toISOString(),
  };
  const { result } = await auditedRecording<ResponseDocumentOf<"operator.dogfood.maintenance.declare">>({
    storage: ctx.deps.storage,
    actor: operator.principal,
    operation: ctx.op.id,
    target: `dogfood:maintenance:${row.id}`,
    now: ctx.now,
    record: async (trx) => {
      const stored = await declareDogfoodMaintenance(trx, row);
      const same =
        stored.row.starts_at === startsAt && stored.row.ends_at === endsAt && stored.row.reason === row.reason;
      if (!stored.inserted && !same) {
        return { outcome: "conflict", value: `maintenance ${row.id} is already declared otherwise` };
      }
      return {
        outcome: stored.inserted ? "performed" : "replayed",
        value: `${startsAt} to ${endsAt}: ${row.reason}`,
        result: maintenanceView(stored.row),
      };
    },
  });
  return result;
};

/** operator.dogfood.interventions.record: a routine intervention fails the period. */
export const recordIntervention: Handler<"operator.dogfood.interventions.record"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const at = iso(ctx.body.at);
  if (Date.parse(at) > ctx.now.getTime()) refuse("invalid_request", `at ${at} is in the future`);
  const tenants = trialTenantsOf(ctx.deps);
  const ledger = await loadTrialLedger(ctx.db, tenants);
  const records: string[] = [];
  for (const id of ctx.body.records ?? []) {
    const ref = ledger.resolve(id);
    if (ref === undefined) refuse("invalid_request", `no run record ${id} in the ledger`);
    if (!records.includes(ref.id)) records.push(ref.id);
  }
  const row = {
    id: ctx.body.id,
    action: ctx.body.action,
    routine: ctx.body.routine ? 1 : 0,
    at,
    records: JSON.stringify(records),
    recorded_by: operator.principal,
    recorded_at: ctx.now.toISOString(),
  };
  const { result } = await auditedRecording<ResponseDocumentOf<"operator.dogfood.interventions.record">>({
    storage: ctx.deps.storage,
    actor: operator.principal,
    operation: ctx.op.id,
    target: `dogfood:intervention:${row.id}`,
    now: ctx.now,
    record: async (trx) => {
      const stored = await recordDogfoodIntervention(trx, row);
      const same =
        stored.row.action === row.action &&
        stored.row.routine === row.routine &&
        stored.row.at === row.at &&
        stored.row.records === row.records;
      if (!stored.inserted && !same) {
        return { outcome: "conflict", value: `intervention ${row.id} is already recorded otherwise` };
      }
      const period = (await loadTrial(trx, tenants, ctx.now, ctx.deps.canaries)).period;
      const failedByThis = period.interventions.find((i) => i.id === row.id)?.period_failed === true;
      return {
        outcome: stored.inserted ? "performed" : "replayed",
        value: `${row.routine === 1 ? "routine" : "non-routine"}: ${row.action}${failedByThis ? " (the period failed)" : ""}`,
        result: interventionView(stored.row, failedByThis),
      };
    },
  });
  return result;
};

/** operator.dogfood.lifecycle.record: a window it falls in does not count (rule 12). */
export const recordLifecycleChange: Handler<"operator.dogfood.lifecycle.record"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const at = iso(ctx.body.at);
  if (Date.parse(at) > ctx.now.getTime()) refuse("invalid_request", `at ${at} is in the future`);
  const row = {
    kind: ctx.body.kind,
    identity: ctx.body.identity,
    at,
    detail: ctx.body.detail,
    host: ctx.body.host ?? null,
    recorded_by: operator.principal,
    recorded_at: ctx.now.toISOString(),
  };
  const { result } = await auditedRecording<ResponseDocumentOf<"operator.dogfood.lifecycle.record">>({
    storage: ctx.deps.storage,
    actor: operator.principal,
    operation: ctx.op.id,
    target: `dogfood:lifecycle:${row.kind}:${row.identity}`,
    now: ctx.now,
    record: async (trx) => {
      const stored = await recordDogfoodLifecycleChange(trx, row);
      const same = stored.row.at === row.at && stored.row.detail === row.detail && stored.row.host === row.host;
      if (!stored.inserted && !same) {
        return {
          outcome: "conflict",
          value: `lifecycle change ${row.kind} ${row.identity} is already recorded otherwise`,
        };
      }
      return {
        outcome: stored.inserted ? "performed" : "replayed",
        value: `${row.kind} ${row.identity} at ${at}`,
        result: lifecycleChangeView(stored.row),
      };
    },
  });
  return result;
};

/**
 * operator.dogfood.spend.record: a month's spend from one source. The line whose source is
 * `plan` records the month's spend plan; its amount is the ceiling the scorecard compares with.
 */
export const recordSpend: Handler<"operator.dogfood.spend.record"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const row = {
    month: ctx.body.month,
    source: ctx.body.source,
    amount_cents: ctx.body.amount_cents,
    recorded_by: operator.principal,
    recorded_at: ctx.now.toISOString(),
  };
  const { result } = await auditedRecording<ResponseDocumentOf<"operator.dogfood.spend.record">>({
    storage: ctx.deps.storage,
    actor: operator.principal,
    operation: ctx.op.id,
    target: `dogfood:spend:${row.month}:${row.source}`,
    now: ctx.now,
    record: async (trx) => {
      const stored = await recordDogfoodSpend(trx, row);
      if (!stored.inserted && stored.row.amount_cents !== row.amount_cents) {
        return {
          outcome: "conflict",
          value: `spend of ${row.month} from ${row.source} is already recorded as ${stored.row.amount_cents} cents`,
        };
      }
      const total = (await listDogfoodSpend(trx))
        .filter((s) => s.month === row.month && s.source !== SPEND_PLAN_SOURCE)
        .reduce((sum, s) => sum + s.amount_cents, 0);
      return {
        outcome: stored.inserted ? "performed" : "replayed",
        value: `${row.month} ${row.source}: ${row.amount_cents} cents${row.source === SPEND_PLAN_SOURCE ? " (spend plan ceiling)" : ""}`,
        result: spendView(stored.row, total),
      };
    },
  });
  return result;
};
