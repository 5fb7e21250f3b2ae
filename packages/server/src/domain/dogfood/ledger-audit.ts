import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import {
  appendOperatorAuditEntry,
  type BlobStore,
  type DogfoodIncidentRow,
  listDogfoodMaintenance,
  listTrialProbeReservations,
  recordDogfoodIncident,
  type Storage,
} from "@kiln/storage";
import { type CanarySettings, canarySettings } from "../platform/canaries/canary-settings.js";
import { operatorAuditValue } from "../platform/operator-audit-value.js";
import { dueProbesOf } from "./due-probes.js";
import { findingOfMissedProbe, findingsOfJob, type LedgerFinding, settlingAttemptOf } from "./ledger-findings.js";
import { loadTrialLedger } from "./trial-ledger.js";
import { trialTenantsOf } from "./trial-tenants.js";

/** The principal the platform records its own findings under. */
export const PLATFORM_PRINCIPAL = "platform";

/** Cargo output read for the wrong-green check; a longer output is read from its end (where the summary is). */
const CARGO_OUTPUT_READ_BYTES = 1024 * 1024;

export interface LedgerAuditDeps {
  readonly storage: Storage;
  readonly blobs: BlobStore;
  readonly clock: Clock;
  readonly dogfoodTenant?: string | undefined;
  /** The late bound a reserved probe is judged by (AppDeps.canaries); the platform's default when unset. */
  readonly canaries?: CanarySettings | undefined;
  readonly log: Logger;
}

/**
 * One pass of the trial's ledger audit: reads the dogfood tenant's and the canaries' jobs,
 * attempts and settlements and the probes reserved, finds wrong greens, duplicate executions,
 * duplicate charges, outages (failed and missed probes) and bounded recoveries
 * (ledger-findings.ts), and records each as an incident naming its run
 * records, with an operator audit entry — exactly once, as the incident id is stable per job and
 * class and the insert keeps the first. Answers the incidents this pass recorded.
 */
export async function runDogfoodLedgerAudit(deps: LedgerAuditDeps): Promise<DogfoodIncidentRow[]> {
  const tenants = trialTenantsOf(deps);
  const ledger = await loadTrialLedger(deps.storage, tenants);
  const maintenance = await listDogfoodMaintenance(deps.storage);
  const recorded: DogfoodIncidentRow[] = [];
  const record = async (finding: LedgerFinding) => {
    const now = deps.clock.now();
    const row = await deps.storage.transaction(async (trx) => {
      const r = await recordDogfoodIncident(trx, {
        id: finding.incidentId,
        class: finding.class,
        occurred_at: finding.occurredAt,
        service_blocking: finding.serviceBlocking ? 1 : 0,
        detail: finding.detail,
        records: JSON.stringify(finding.records),
        recorded_by: PLATFORM_PRINCIPAL,
        recorded_at: now.toISOString(),
      });
      if (!r.inserted) return null;
      await appendOperatorAuditEntry(
        trx,
        {
          actor: PLATFORM_PRINCIPAL,
          target: `dogfood:incident:${finding.incidentId}`,
          value: operatorAuditValue("dogfood.ledger_audit", "performed", `${finding.class}: ${finding.detail}`),
        },
        now,
      );
      return r.row;
    });
    if (row !== null) {
      recorded.push(row);
      deps.log.warn({ incident: row.id, class: row.class }, `dogfood ledger audit: ${row.class} recorded`);
    }
  };
  for (const job of ledger.jobs) {
    const settling = job.status === "passed" ? settlingAttemptOf(ledger, job.id) : undefined;
    const output = await cargoOutputOf(deps.blobs, settling?.cargo_output_sha256 ?? null, deps.log);
    for (const finding of findingsOfJob(ledger, job, output, maintenance)) await record(finding);
  }
  // Probes are due when reserved: one that never became a job, or whose job did not finish by
  // its late bound, is an outage too (unless due inside declared maintenance, rule 11).
  const reservations = await listTrialProbeReservations(deps.storage, { tenantId: tenants.probe });
  for (const probe of dueProbesOf(ledger, reservations, canarySettings(deps.canaries), deps.clock.now())) {
    const finding = findingOfMissedProbe(ledger, probe, maintenance);
    if (finding !== undefined) await record(finding);
  }
  return recorded;
}

/** The retained cargo output's text (its last megabyte), or null when none is retained or readable. */
async function cargoOutputOf(blobs: BlobStore, sha256: string | null, log: Logger): Promise<string | null> {
  if (sha256 === null) return null;
  try {
    const bytes = await blobs.get(sha256);
    return bytes.subarray(Math.max(0, bytes.length - CARGO_OUTPUT_READ_BYTES)).toString("utf8");
  } catch (error) {
    // The report and exit code are still checked; a missing blob is worth a warning, not a stop.
    log.warn({ err: error, sha256 }, "dogfood ledger audit: cargo output not readable");
    return null;
  }
}

/** Runs the ledger audit every `everyMs` on the clock; a failed pass is logged and emitted, the next tries again. */
export function startDogfoodLedgerAudit(
  deps: LedgerAuditDeps & { readonly onFailure?: (failure: LoopFailure) => void },
  everyMs = 60_000,
): PeriodicLoop {
  return startPeriodicLoop({
    name: "dogfood ledger audit",
    clock: deps.clock,
    everyMs,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: async () => {
      await runDogfoodLedgerAudit(deps);
    },
  });
}
