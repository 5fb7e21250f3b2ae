import type { ResponseDocumentOf } from "@kiln/contract";
import { DOGFOOD_ZERO_TOLERANCE_CLASSES } from "@kiln/contract";
import {
  type Db,
  type DogfoodIncidentRow,
  readDogfoodIncident,
  recordDogfoodIncident,
  recordDogfoodIncidentIssue,
  resolveDogfoodIncident,
  type Storage,
} from "@kiln/storage";
import { auditedRecording } from "../../../domain/dogfood/audited-recording.js";
import { loadTrialLedger } from "../../../domain/dogfood/trial-ledger.js";
import { trialTenantsOf } from "../../../domain/dogfood/trial-tenants.js";
import { incidentView } from "../../../domain/dogfood/trial-views.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/**
 * Dogfood incidents (rule 10): a zero-tolerance class names the run records that exposed it and
 * stops the trial at once (the period computes the stop from the incident); an issue filed on a
 * different UTC day than the incident is published as filed late; only operator.dogfood.incidents
 * .resolve resolves an incident — no run does. Every recording is audited.
 */

const ZERO_TOLERANCE: readonly string[] = DOGFOOD_ZERO_TOLERANCE_CLASSES;
const sameInstant = (a: string | null, b: string | null) =>
  a === null ? b === null : b !== null && Date.parse(a) === Date.parse(b);

/** operator.dogfood.incidents.record */
export const recordIncident: Handler<"operator.dogfood.incidents.record"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const body = ctx.body;
  const named = body.records ?? [];
  if (ZERO_TOLERANCE.includes(body.class) && named.length === 0) {
    refuse("invalid_request", `a ${body.class} incident names at least one run record that exposed it (body.records)`);
  }
  if (Date.parse(body.occurred_at) > ctx.now.getTime()) {
    refuse("invalid_request", `occurred_at ${body.occurred_at} is in the future`);
  }
  // Every named run record must be in the ledger; it is stored under its canonical identity.
  const ledger = await loadTrialLedger(ctx.db, trialTenantsOf(ctx.deps));
  const records: string[] = [];
  for (const id of named) {
    const ref = ledger.resolve(id);
    if (ref === undefined) refuse("invalid_request", `no run record ${id} in the ledger`);
    if (!records.includes(ref.id)) records.push(ref.id);
  }
  const row = {
    id: body.id,
    class: body.class,
    occurred_at: new Date(body.occurred_at).toISOString(),
    service_blocking: body.service_blocking ? 1 : 0,
    detail: body.detail,
    records: JSON.stringify(records),
    recorded_by: operator.principal,
    recorded_at: ctx.now.toISOString(),
  };
  const { result } = await auditedRecording<ResponseDocumentOf<"operator.dogfood.incidents.record">>({
    storage: ctx.deps.storage,
    actor: operator.principal,
    operation: ctx.op.id,
    target: `dogfood:incident:${body.id}`,
    now: ctx.now,
    record: async (trx) => {
      const stored = await recordDogfoodIncident(trx, row);
      const same =
        stored.row.class === row.class &&
        sameInstant(stored.row.occurred_at, row.occurred_at) &&
        stored.row.service_blocking === row.service_blocking &&
        stored.row.detail === row.detail &&
        stored.row.records === row.records;
      if (!stored.inserted && !same) {
        return { outcome: "conflict", value: `incident ${body.id} is already recorded with other content` };
      }
      return {
        outcome: stored.inserted ? "performed" : "replayed",
        value: `${row.class}${ZERO_TOLERANCE.includes(row.class) ? " (zero tolerance: the trial stops)" : ""} naming ${records.join(", ") || "no run record"}`,
        result: incidentView(stored.row),
      };
    },
  });
  return result;
};

/** operator.dogfood.incidents.issue: the dogfood repository issue filed for an incident. */
export const recordIncidentIssue: Handler<"operator.dogfood.incidents.issue"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const { incident, number } = ctx.body;
  const filedAt = new Date(ctx.body.filed_at).toISOString();
  const existing = await readDogfoodIncident(ctx.db, incident);
  if (existing === undefined) return refuse("not_found", `no incident ${incident}`);
  if (Date.parse(filedAt) > ctx.now.getTime()) refuse("invalid_request", `filed_at ${filedAt} is in the future`);
  if (Date.parse(filedAt) < Date.parse(existing.occurred_at)) {
    refuse("invalid_request", `filed_at ${filedAt} is before the incident occurred (${existing.occurred_at})`);
  }
  return changeIncident(
    { storage: ctx.deps.storage, actor: operator.principal, operation: ctx.op.id, now: ctx.now },
    incident,
    {
      change: (trx) =>
        recordDogfoodIncidentIssue(trx, {
          incident,
          number,
          filedAt,
          recordedBy: operator.principal,
          recordedAt: ctx.now.toISOString(),
        }),
      sameAs: (row) => row.issue_number === number && sameInstant(row.issue_filed_at, filedAt),
      conflict: (row) => `incident ${incident} already has issue #${row.issue_number} filed at ${row.issue_filed_at}`,
      value: (view) => `issue #${number} filed at ${filedAt}${view.issue?.filed_late ? " (filed late)" : ""}`,
    },
  );
};

/** operator.dogfood.incidents.resolve: the only way an incident is resolved (no run resolves one). */
export const resolveIncident: Handler<"operator.dogfood.incidents.resolve"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const { incident, detail } = ctx.body;
  if ((await readDogfoodIncident(ctx.db, incident)) === undefined)
    return refuse("not_found", `no incident ${incident}`);
  return changeIncident(
    { storage: ctx.deps.storage, actor: operator.principal, operation: ctx.op.id, now: ctx.now },
    incident,
    {
      change: (trx) =>
        resolveDogfoodIncident(trx, {
          incident,
          detail,
          resolvedBy: operator.principal,
          resolvedAt: ctx.now.toISOString(),
        }),
      sameAs: (row) => row.resolution_detail === detail,
      conflict: (row) => `incident ${incident} was already resolved at ${row.resolved_at} otherwise`,
      value: () => `resolved: ${detail}`,
    },
  );
};

type IncidentView = ReturnType<typeof incidentView>;

/**
 * An audited change to a recorded incident (its issue, its resolution): performed once; asked
 * again with the same content, replayed; with other content, a conflict naming what is recorded.
 */
async function changeIncident(
  by: { storage: Storage; actor: string; operation: string; now: Date },
  incident: string,
  how: {
    change: (trx: Db) => Promise<{ applied: boolean; row: DogfoodIncidentRow } | undefined>;
    sameAs: (row: DogfoodIncidentRow) => boolean;
    conflict: (row: DogfoodIncidentRow) => string;
    value: (view: IncidentView) => string;
  },
): Promise<IncidentView> {
  const { result } = await auditedRecording<IncidentView>({
    ...by,
    target: `dogfood:incident:${incident}`,
    record: async (trx) => {
      const changed = await how.change(trx);
      // The incident was read before the recording; storage answers undefined only for a missing one.
      const row = changed?.row as DogfoodIncidentRow;
      if (!changed?.applied && !how.sameAs(row)) return { outcome: "conflict", value: how.conflict(row) };
      const view = incidentView(row);
      return { outcome: changed?.applied ? "performed" : "replayed", value: how.value(view), result: view };
    },
  });
  return result;
}
