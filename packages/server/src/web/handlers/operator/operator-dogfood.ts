import type { ResponseDocumentOf } from "@kiln/contract";
import {
  type DogfoodGateEvidenceRow,
  listDogfoodGateEvidence,
  openDogfoodGate,
  readDogfoodGateOpening,
  recordDogfoodGateEvidence,
} from "@kiln/storage";
import { auditedRecording } from "../../../domain/dogfood/audited-recording.js";
import { everyPartMet, evidenceView, gateView } from "../../../domain/dogfood/entry-gate.js";
import { settlingAttemptOf } from "../../../domain/dogfood/ledger-findings.js";
import { loadTrial } from "../../../domain/dogfood/load-trial.js";
import { parseRunRecordId } from "../../../domain/dogfood/run-record-identity.js";
import { runRecordView } from "../../../domain/dogfood/run-record-view.js";
import { loadTrialLedger } from "../../../domain/dogfood/trial-ledger.js";
import { trialTenantsOf } from "../../../domain/dogfood/trial-tenants.js";
import { verifyGateReference } from "../../../domain/dogfood/verify-gate-reference.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/**
 * The dogfood trial's reads and its entry gate (issue 19; docs/dogfood-trial.md). The period is
 * computed on every read from what is recorded and from the job ledger (domain/dogfood/trial-period.ts).
 */

/** operator.dogfood.period: gate, state, clock, closed windows, incidents, scorecard, beta decision. */
export const dogfoodPeriod: Handler<"operator.dogfood.period"> = async (ctx) =>
  (await loadTrial(ctx.db, trialTenantsOf(ctx.deps), ctx.now, ctx.deps.canaries)).period;

/** operator.dogfood.records.get: one run record by its identity. */
export const dogfoodRecord: Handler<"operator.dogfood.records.get"> = async (ctx) => {
  const id = ctx.query.id;
  if (parseRunRecordId(id) === null) {
    refuse(
      "invalid_request",
      "query.id is not a run record identity (shadow:<job>, probe:<job> or head:<owner/name>@<sha>, `#n` for attempt n > 1)",
    );
  }
  const trial = await loadTrial(ctx.db, trialTenantsOf(ctx.deps), ctx.now, ctx.deps.canaries);
  const ref = trial.ledger.resolve(id);
  if (ref === undefined) return refuse("not_found", `no run record ${id}`);
  const settling = settlingAttemptOf(trial.ledger, ref.job.id);
  let cargoOutput: string | null = null;
  const sha = ref.job.status === "passed" ? settling?.cargo_output_sha256 : null;
  if (sha != null) {
    try {
      cargoOutput = (await ctx.deps.blobs.get(sha)).toString("utf8");
    } catch {
      cargoOutput = null; // Not retained any more: the report and exit code still speak.
    }
  }
  return runRecordView({
    ref,
    ledger: trial.ledger,
    period: trial.period,
    incidents: trial.incidents,
    maintenance: trial.maintenance,
    cargoOutput,
  });
};

const sameEvidence = (a: DogfoodGateEvidenceRow, b: DogfoodGateEvidenceRow) =>
  a.source === b.source &&
  a.expires_at === b.expires_at &&
  a.detail === b.detail &&
  (a.produced_at === null) === (b.produced_at === null) &&
  (a.produced_at === null || Date.parse(a.produced_at) === Date.parse(b.produced_at ?? ""));

/**
 * operator.dogfood.gate.record: verifies the reference against the platform's own records
 * (rule 9), records it, and when every part is then met opens the gate, which starts the
 * seven-day clock. The same evidence again is answered as recorded (newly_recorded false);
 * the same part and reference with other content is `conflict`. Audited.
 */
export const recordGateEvidence: Handler<"operator.dogfood.gate.record"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const tenants = trialTenantsOf(ctx.deps);
  const ledger = await loadTrialLedger(ctx.db, tenants);
  const verified = await verifyGateReference({
    db: ctx.db,
    ledger,
    gitHubApp: ctx.deps.gitHubApp,
    request: ctx.body,
    now: ctx.now,
  });
  const at = ctx.now.toISOString();
  const row: DogfoodGateEvidenceRow = {
    part: ctx.body.part,
    reference: ctx.body.reference,
    source: verified.source,
    expires_at: verified.expiresAt === null ? null : new Date(verified.expiresAt).toISOString(),
    detail: ctx.body.detail ?? null,
    produced_at: ctx.body.produced_at === undefined ? null : new Date(ctx.body.produced_at).toISOString(),
    verification: JSON.stringify(verified.verification),
    recorded_by: operator.principal,
    recorded_at: at,
  };
  const { result } = await auditedRecording<ResponseDocumentOf<"operator.dogfood.gate.record">>({
    storage: ctx.deps.storage,
    actor: operator.principal,
    operation: ctx.op.id,
    target: `dogfood:gate:${row.part}`,
    now: ctx.now,
    record: async (trx) => {
      const stored = await recordDogfoodGateEvidence(trx, row);
      if (!stored.inserted && !sameEvidence(stored.row, row)) {
        return {
          outcome: "conflict",
          value: `part ${row.part} already holds reference ${row.reference} recorded with other content at ${stored.row.recorded_at}`,
        };
      }
      const evidence = await listDogfoodGateEvidence(trx);
      let opening = await readDogfoodGateOpening(trx);
      let clockStartedAt: string | null = null;
      if (opening === undefined && everyPartMet(evidence, ctx.now)) {
        const opened = await openDogfoodGate(trx, { openedAt: at, openedBy: operator.principal });
        opening = opened.row;
        if (opened.inserted) clockStartedAt = opened.row.opened_at;
      }
      return {
        outcome: stored.inserted ? "performed" : "replayed",
        value: `${row.part} ← ${row.reference} (${row.source})${clockStartedAt === null ? "" : "; the gate opened and the seven-day clock started"}`,
        result: {
          evidence: evidenceView(stored.row),
          newly_recorded: stored.inserted,
          gate: gateView(evidence, opening, ctx.now),
          clock_started_at: clockStartedAt,
        },
      };
    },
  });
  return result;
};
