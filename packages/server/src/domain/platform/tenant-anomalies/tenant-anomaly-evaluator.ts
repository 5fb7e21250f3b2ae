import { createHash } from "node:crypto";
import { type Clock, type Logger, type LoopFailure, type PeriodicLoop, startPeriodicLoop } from "@kiln/contract";
import {
  countSubmissionsByTenant,
  listFinishedAttemptMeasurements,
  raiseTenantAnomaly,
  type Storage,
} from "@kiln/storage";
import type { AnomalyFinding, AnomalyRuleDescription } from "./anomaly-rule.js";
import { CPU_SATURATED_WITHOUT_OUTPUT, cpuSaturatedWithoutOutput } from "./cpu-saturated-without-output.js";
import { HISTORY_DAYS, SUBMISSION_BURST, submissionBurst } from "./submission-burst.js";

/** The rules by flag: what the operator's list says each flag means. */
export const TENANT_ANOMALY_RULES: ReadonlyMap<string, AnomalyRuleDescription> = new Map(
  [CPU_SATURATED_WITHOUT_OUTPUT, SUBMISSION_BURST].map((r) => [r.flag, r]),
);

/** How often the tenant anomaly rules run unless KILN_ANOMALY_INTERVAL_SECONDS says otherwise. */
export const DEFAULT_ANOMALY_INTERVAL_SECONDS = 300;
/** Attempts finished this long ago are judged again each pass (the flag is raised once). */
const ATTEMPT_LOOKBACK_SECONDS = 24 * 3600;
/** At most this many attempts per pass: a pass stays bounded however busy the platform was. */
const ATTEMPTS_PER_PASS = 5000;

/** A flag's id: stable for its rule, tenant and subject, so raising it twice finds the first. */
export function anomalyIdOf(finding: Pick<AnomalyFinding, "rule" | "tenantId" | "subject">): string {
  const digest = createHash("sha256").update(`${finding.rule}\n${finding.tenantId}\n${finding.subject}`).digest("hex");
  return `ta-${digest.slice(0, 24)}`;
}

/**
 * Evaluates every tenant anomaly rule over what is recorded: attempts finished in the last day
 * (their cgroup CPU seconds, wall clock, report and retained output) and the submissions of the
 * current UTC hour against each tenant's history. Each finding is raised once
 * (raise-tenant-anomaly.ts); the pass answers the flags it newly raised.
 */
export class TenantAnomalyEvaluator {
  constructor(private readonly deps: { storage: Storage; clock: Clock }) {}

  async runOnce(): Promise<AnomalyFinding[]> {
    const { storage } = this.deps;
    const now = this.deps.clock.now();
    const findings: AnomalyFinding[] = [];
    const attempts = await listFinishedAttemptMeasurements(storage, {
      since: new Date(now.getTime() - ATTEMPT_LOOKBACK_SECONDS * 1000).toISOString(),
      limit: ATTEMPTS_PER_PASS,
    });
    for (const attempt of attempts) {
      const finding = cpuSaturatedWithoutOutput(attempt);
      if (finding !== null) findings.push(finding);
    }
    const hourStart = new Date(Math.floor(now.getTime() / 3_600_000) * 3_600_000);
    const historyStart = new Date(hourStart.getTime() - HISTORY_DAYS * 24 * 3_600_000);
    const [inHour, inHistory] = await Promise.all([
      countSubmissionsByTenant(storage, {
        from: hourStart.toISOString(),
        to: new Date(hourStart.getTime() + 3_600_000).toISOString(),
      }),
      countSubmissionsByTenant(storage, { from: historyStart.toISOString(), to: hourStart.toISOString() }),
    ]);
    for (const [tenantId, count] of inHour) {
      const finding = submissionBurst({
        tenantId,
        hourStart,
        now,
        inHour: count,
        inHistory: inHistory.get(tenantId) ?? 0,
      });
      if (finding !== null) findings.push(finding);
    }
    const raised: AnomalyFinding[] = [];
    for (const finding of findings) {
      const isNew = await raiseTenantAnomaly(storage, {
        id: anomalyIdOf(finding),
        tenantId: finding.tenantId,
        rule: finding.rule,
        subject: finding.subject,
        jobId: finding.jobId,
        evidence: JSON.stringify(finding.evidence),
        now,
      });
      if (isNew) raised.push(finding);
    }
    return raised;
  }
}

/** Runs the evaluator every `intervalSeconds` on the clock; a failed pass is logged and emitted. */
export function startTenantAnomalyLoop(
  evaluator: TenantAnomalyEvaluator,
  deps: { clock: Clock; log: Logger; intervalSeconds: number; onFailure?: (failure: LoopFailure) => void },
): PeriodicLoop {
  return startPeriodicLoop({
    name: "tenant anomaly rules",
    clock: deps.clock,
    everyMs: deps.intervalSeconds * 1000,
    log: deps.log,
    ...(deps.onFailure === undefined ? {} : { onFailure: deps.onFailure }),
    run: async () => {
      const raised = await evaluator.runOnce();
      for (const f of raised)
        deps.log.warn({ tenant: f.tenantId, subject: f.subject }, `tenant anomaly ${f.rule} raised`);
    },
  });
}
