import {
  DOGFOOD_COUNTING_WINDOWS_REQUIRED,
  DOGFOOD_WINDOW_HOURS,
  DOGFOOD_ZERO_TOLERANCE_CLASSES,
  type DogfoodPeriod,
} from "@kiln/contract";
import type {
  CanaryRecord,
  DogfoodGateEvidenceRow,
  DogfoodGateOpeningRow,
  DogfoodIncidentRow,
  DogfoodInterventionRow,
  DogfoodLifecycleChangeRow,
  DogfoodMaintenanceRow,
  DogfoodSpendRow,
} from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import type { CanarySettings } from "../platform/canaries/canary-settings.js";
import { type DueProbe, dueProbesOf } from "./due-probes.js";
import { gateView } from "./entry-gate.js";
import { inMaintenance } from "./ledger-findings.js";
import type { TrialLedger } from "./trial-ledger.js";
import { incidentView, interventionView, lifecycleChangeView, maintenanceView, utcDayOf } from "./trial-views.js";

export type PeriodDocument = Static<typeof DogfoodPeriod>;
type WindowDocument = PeriodDocument["closed_windows"][number];
type ProbeAccount = WindowDocument["probes"];

/** The source of the spend line that records a month's spend plan; its amount is the plan's ceiling. */
export const SPEND_PLAN_SOURCE = "plan";

const WINDOW_MS = DOGFOOD_WINDOW_HOURS * 3600 * 1000;
const ZERO_TOLERANCE: readonly string[] = DOGFOOD_ZERO_TOLERANCE_CLASSES;

export interface TrialRecords {
  readonly evidence: readonly DogfoodGateEvidenceRow[];
  readonly opening: DogfoodGateOpeningRow | undefined;
  readonly incidents: readonly DogfoodIncidentRow[];
  readonly maintenance: readonly DogfoodMaintenanceRow[];
  readonly interventions: readonly DogfoodInterventionRow[];
  readonly lifecycle: readonly DogfoodLifecycleChangeRow[];
  readonly spend: readonly DogfoodSpendRow[];
  /** The canaries reserved for the probe tenant: each is a probe due, whether or not its job ran. */
  readonly probeReservations: readonly CanaryRecord[];
}

/** What the period is computed from: the records, the ledger, and the canaries' late bound. */
type PeriodInput = {
  readonly now: Date;
  readonly ledger: TrialLedger;
  readonly canaries: CanarySettings;
} & TrialRecords;

const iso = (ms: number) => new Date(ms).toISOString();
const at = (text: string) => Date.parse(text);

/**
 * The dogfood period as the rules imply it at `now`, computed from what is recorded and from the
 * ledger (nothing about the period is stored, so it can never disagree with its inputs):
 *
 * - The gate's opening starts clock 1. Windows are 24 hours, anchored at their clock's start.
 * - A closed window counts unless declared maintenance overlaps it (rule 11), a lifecycle change
 *   falls in it (rule 12) or a service-blocking incident (a declared one, or an outage the
 *   platform recorded) occurred in it; a window that does not count sets the consecutive count
 *   back to 0. Seven consecutive counting windows end the period.
 * - A zero-tolerance incident occurring under a clock stops the trial at that instant (its window
 *   closes there, not counting); once every zero-tolerance incident from then on is resolved, a
 *   new clock starts at the latest resolution (rule 10, "a new clock starts only once resolved").
 * - A routine intervention at or after the gate's opening fails the period (rule 12's neighbour in
 *   States and transitions: one routine intervention fails the period).
 */
export function computePeriod(input: PeriodInput): PeriodDocument {
  const now = input.now.getTime();
  const probes = dueProbesOf(input.ledger, input.probeReservations, input.canaries, input.now);
  const gate = gateView(input.evidence, input.opening, input.now);
  const closed: WindowDocument[] = [];
  let state: PeriodDocument["state"] = "gate_closed";
  let clockNumber = 0;
  let clockStart: number | null = null;
  let clockEnds: number | null = null;
  let stoppedAt: number | null = null;
  let stoppedBy: string[] = [];
  let consecutive = 0;
  let openWindow: PeriodDocument["open_window"] = null;
  let endedAt: number | null = null;
  let failedBy: DogfoodInterventionRow | null = null;

  const zeroTolerance = input.incidents
    .filter((i) => ZERO_TOLERANCE.includes(i.class))
    .sort((a, b) => at(a.occurred_at) - at(b.occurred_at));
  const opened = input.opening === undefined ? null : at(input.opening.opened_at);
  const routine =
    opened === null
      ? undefined
      : input.interventions
          .filter((i) => i.routine === 1 && at(i.at) >= opened && at(i.at) <= now)
          .sort((a, b) => at(a.at) - at(b.at))[0];

  if (opened !== null) {
    clockNumber = 1;
    clockStart = opened;
    let s = opened;
    for (;;) {
      const e = s + WINDOW_MS;
      const stop = zeroTolerance.find(
        (i) => at(i.occurred_at) >= s && at(i.occurred_at) < e && at(i.occurred_at) <= now,
      );
      const failAt = routine !== undefined && at(routine.at) >= s && at(routine.at) < e ? at(routine.at) : null;
      if (failAt !== null && (stop === undefined || failAt <= at(stop.occurred_at))) {
        closed.push(
          windowOf(input, probes, clockNumber, s, failAt, [`routine intervention ${routine?.id} failed the period`], 0),
        );
        state = "failed";
        failedBy = routine ?? null;
        endedAt = failAt;
        consecutive = 0;
        break;
      }
      if (stop !== undefined) {
        const stopAt = at(stop.occurred_at);
        closed.push(
          windowOf(
            input,
            probes,
            clockNumber,
            s,
            stopAt,
            [`zero-tolerance incident ${stop.id} (${stop.class}) stopped the trial`],
            0,
          ),
        );
        consecutive = 0;
        // Every zero-tolerance incident from the stop on must be resolved before a new clock starts.
        let resume = stopAt;
        let unresolved: DogfoodIncidentRow[] = [];
        for (;;) {
          const holding = zeroTolerance.filter(
            (i) => at(i.occurred_at) >= stopAt && at(i.occurred_at) <= Math.max(resume, stopAt),
          );
          unresolved = holding.filter((i) => i.resolved_at === null);
          if (unresolved.length > 0) break;
          const latest = Math.max(...holding.map((i) => at(i.resolved_at ?? i.occurred_at)));
          if (latest <= resume) break;
          resume = latest;
        }
        if (routine !== undefined && at(routine.at) >= stopAt && (unresolved.length > 0 || at(routine.at) < resume)) {
          state = "failed";
          failedBy = routine;
          endedAt = at(routine.at);
          break;
        }
        if (unresolved.length > 0) {
          state = "stopped";
          stoppedAt = stopAt;
          stoppedBy = zeroTolerance
            .filter((i) => at(i.occurred_at) >= stopAt && i.resolved_at === null)
            .map((i) => i.id);
          break;
        }
        clockNumber += 1;
        clockStart = resume;
        s = resume;
        continue;
      }
      if (e > now) {
        state = "running";
        openWindow = { clock: clockNumber, starts_at: iso(s), ends_at: iso(e) };
        clockEnds = s + (DOGFOOD_COUNTING_WINDOWS_REQUIRED - consecutive) * WINDOW_MS;
        break;
      }
      const reasons = reasonsAgainst(input, s, e);
      consecutive = reasons.length === 0 ? consecutive + 1 : 0;
      closed.push(windowOf(input, probes, clockNumber, s, e, reasons, consecutive));
      if (consecutive === DOGFOOD_COUNTING_WINDOWS_REQUIRED) {
        state = "ended";
        endedAt = e;
        clockEnds = e;
        break;
      }
      s = e;
    }
  }

  const incidents = [...input.incidents].sort(
    (a, b) => at(a.occurred_at) - at(b.occurred_at) || a.id.localeCompare(b.id),
  );
  const scorecard = scorecardOf(input, probes, closed, now);
  return {
    as_of: iso(now),
    dogfood_tenant: input.ledger.tenants.dogfood,
    probe_tenant: input.ledger.tenants.probe,
    gate,
    state,
    clock: {
      number: clockNumber,
      started_at: clockStart === null ? null : iso(clockStart),
      ends_at: clockEnds === null || state === "stopped" || state === "failed" ? null : iso(clockEnds),
      stopped_at: stoppedAt === null ? null : iso(stoppedAt),
      stopped_by: stoppedBy,
      counting_windows: consecutive,
      required_windows: DOGFOOD_COUNTING_WINDOWS_REQUIRED,
      window_hours: DOGFOOD_WINDOW_HOURS,
    },
    open_window: openWindow,
    closed_windows: closed,
    incidents: incidents.map(incidentView),
    maintenance: input.maintenance.map(maintenanceView),
    interventions: input.interventions.map((i) => interventionView(i, failedBy?.id === i.id)),
    lifecycle_changes: input.lifecycle.map(lifecycleChangeView),
    scorecard,
    beta_decision: endedAt === null ? null : betaDecision(state, endedAt, failedBy, input.incidents, scorecard, closed),
  };
}

/** Why the closed window [s, e) does not count; empty when it counts. */
function reasonsAgainst(input: TrialRecords, s: number, e: number): string[] {
  const reasons: string[] = [];
  for (const m of input.maintenance) {
    if (at(m.starts_at) < e && at(m.ends_at) > s) {
      reasons.push(`declared maintenance ${m.id} (${m.starts_at} to ${m.ends_at})`);
    }
  }
  for (const c of input.lifecycle) {
    if (at(c.at) >= s && at(c.at) < e) reasons.push(`lifecycle change ${c.kind} ${c.identity} at ${c.at}`);
  }
  for (const i of input.incidents) {
    if (
      !ZERO_TOLERANCE.includes(i.class) &&
      i.service_blocking === 1 &&
      at(i.occurred_at) >= s &&
      at(i.occurred_at) < e
    ) {
      reasons.push(`service-blocking incident ${i.id} (${i.class}) at ${i.occurred_at}`);
    }
  }
  return reasons;
}

function windowOf(
  input: PeriodInput,
  probes: readonly DueProbe[],
  clock: number,
  s: number,
  e: number,
  reasons: string[],
  consecutive: number,
): WindowDocument {
  const inWindow = (text: string) => at(text) >= s && at(text) < e;
  const jobs = input.ledger.jobs.filter((j) => inWindow(j.accepted_at));
  return {
    clock,
    starts_at: iso(s),
    ends_at: iso(e),
    counts: reasons.length === 0,
    reasons,
    consecutive,
    probes: probeAccount(
      probes.filter((p) => inWindow(p.dueAt)),
      input.maintenance,
    ),
    run_records: jobs.filter((j) => j.tenant_id === input.ledger.tenants.dogfood).length,
  };
}

function probeAccount(probes: readonly DueProbe[], maintenance: readonly DogfoodMaintenanceRow[]): ProbeAccount {
  const account = { due: 0, passed: 0, failed: 0, unsettled: 0, missed: 0, declared_maintenance: 0 };
  for (const p of probes) {
    account.due += 1;
    // Rule 11: every probe due inside declared maintenance is accounted as declared maintenance,
    // whatever became of it — also one whose job never ran.
    if (inMaintenance(p.dueAt, maintenance) !== undefined) account.declared_maintenance += 1;
    else account[p.outcome] += 1;
  }
  return account;
}

function scorecardOf(
  input: PeriodInput,
  dueProbes: readonly DueProbe[],
  closed: readonly WindowDocument[],
  now: number,
): PeriodDocument["scorecard"] {
  const months = [...new Set(input.spend.map((s) => s.month))].sort().map((month) => {
    const lines = input.spend.filter((s) => s.month === month);
    const plan = lines.find((s) => s.source === SPEND_PLAN_SOURCE);
    const spend = lines.filter((s) => s.source !== SPEND_PLAN_SOURCE).reduce((sum, s) => sum + s.amount_cents, 0);
    return {
      month,
      spend_cents: spend,
      spend_ceiling_cents: plan?.amount_cents ?? null,
      within_ceiling: plan === undefined ? null : spend <= plan.amount_cents,
    };
  });
  const month = iso(now).slice(0, 7);
  const current = months.find((m) => m.month === month) ?? {
    month,
    spend_cents: 0,
    spend_ceiling_cents: null,
    within_ceiling: null,
  };
  const issued = input.incidents.filter((i) => i.issue_filed_at !== null);
  const probes = probeAccount(dueProbes, input.maintenance);
  return {
    month,
    spend_cents: current.spend_cents,
    spend_ceiling_cents: current.spend_ceiling_cents,
    within_ceiling: current.within_ceiling,
    months,
    windows_counted: closed.filter((w) => w.counts).length,
    windows_not_counted: closed.filter((w) => !w.counts).length,
    incidents: input.incidents.length,
    zero_tolerance_incidents: input.incidents.filter((i) => ZERO_TOLERANCE.includes(i.class)).length,
    unresolved_incidents: input.incidents.filter((i) => i.resolved_at === null).length,
    issues_filed_late: issued.filter((i) => utcDayOf(i.issue_filed_at ?? "") !== utcDayOf(i.occurred_at)).length,
    routine_interventions: input.interventions.filter((i) => i.routine === 1).length,
    probes,
  };
}

function betaDecision(
  state: PeriodDocument["state"],
  endedAt: number,
  failedBy: DogfoodInterventionRow | null,
  incidents: readonly DogfoodIncidentRow[],
  scorecard: PeriodDocument["scorecard"],
  closed: readonly WindowDocument[],
): NonNullable<PeriodDocument["beta_decision"]> {
  const reasons: string[] = [];
  let beta = true;
  if (state === "failed") {
    beta = false;
    reasons.push(`routine intervention ${failedBy?.id ?? "?"} failed the period`);
  } else {
    reasons.push(
      `${DOGFOOD_COUNTING_WINDOWS_REQUIRED} consecutive counting windows closed (${closed.filter((w) => w.counts).length} counted of ${closed.length})`,
    );
  }
  const unresolved = incidents.filter((i) => i.resolved_at === null);
  if (unresolved.length > 0) {
    beta = false;
    reasons.push(`unresolved incidents: ${unresolved.map((i) => i.id).join(", ")}`);
  } else {
    reasons.push(`every incident resolved (${incidents.length})`);
  }
  const over = scorecard.months.filter((m) => m.within_ceiling === false);
  const unplanned = scorecard.months.filter((m) => m.within_ceiling === null);
  if (over.length > 0 || unplanned.length > 0) {
    beta = false;
    if (over.length > 0) reasons.push(`spend over the plan's ceiling in ${over.map((m) => m.month).join(", ")}`);
    if (unplanned.length > 0)
      reasons.push(`spend without a recorded plan in ${unplanned.map((m) => m.month).join(", ")}`);
  } else {
    reasons.push("spend within the plan's ceiling in every month recorded");
  }
  return { decision: beta ? "beta" : "no_beta", at: iso(endedAt), reasons };
}
