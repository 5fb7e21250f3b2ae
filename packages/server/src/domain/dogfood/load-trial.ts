import {
  listDogfoodGateEvidence,
  listDogfoodIncidents,
  listDogfoodInterventions,
  listDogfoodLifecycleChanges,
  listDogfoodMaintenance,
  listDogfoodSpend,
  listTrialProbeReservations,
  readDogfoodGateOpening,
  type StorageOrTransaction,
} from "@kiln/storage";
import { type CanarySettings, canarySettings } from "../platform/canaries/canary-settings.js";
import { loadTrialLedger, type TrialLedger } from "./trial-ledger.js";
import { computePeriod, type PeriodDocument, type TrialRecords } from "./trial-period.js";
import type { TrialTenants } from "./trial-tenants.js";

export interface LoadedTrial extends TrialRecords {
  readonly ledger: TrialLedger;
  readonly period: PeriodDocument;
}

/**
 * Everything recorded about the trial, its ledger, and the period they imply at `now`.
 * `canaries` gives the late bound a reserved probe is judged by (AppDeps.canaries; the
 * platform's default when unset, as workload health takes it).
 */
export async function loadTrial(
  db: StorageOrTransaction,
  tenants: TrialTenants,
  now: Date,
  canaries?: CanarySettings,
): Promise<LoadedTrial> {
  const settings = canarySettings(canaries);
  const [evidence, opening, incidents, maintenance, interventions, lifecycle, spend, probeReservations, ledger] =
    await Promise.all([
      listDogfoodGateEvidence(db),
      readDogfoodGateOpening(db),
      listDogfoodIncidents(db),
      listDogfoodMaintenance(db),
      listDogfoodInterventions(db),
      listDogfoodLifecycleChanges(db),
      listDogfoodSpend(db),
      listTrialProbeReservations(db, { tenantId: tenants.probe }),
      loadTrialLedger(db, tenants),
    ]);
  const records = { evidence, opening, incidents, maintenance, interventions, lifecycle, spend, probeReservations };
  return { ...records, ledger, period: computePeriod({ now, ledger, canaries: settings, ...records }) };
}
