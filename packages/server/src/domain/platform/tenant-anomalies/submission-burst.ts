import type { AnomalyFinding, AnomalyRuleDescription } from "./anomaly-rule.js";

/** A burst is at least this many submissions in one UTC hour… */
export const BURST_MIN_SUBMISSIONS = 50;
/** …and this many times the tenant's hourly average over the history window. */
export const BURST_FACTOR = 10;
export const HISTORY_DAYS = 7;

export const SUBMISSION_BURST: AnomalyRuleDescription = {
  flag: "submission_burst",
  description: `at least ${BURST_MIN_SUBMISSIONS} jobs accepted in one UTC hour and more than ${BURST_FACTOR} times the tenant's hourly average over the ${HISTORY_DAYS} days before that hour`,
};

/**
 * A burst of submissions far above the tenant's history: the jobs accepted in the current UTC
 * hour so far against the tenant's hourly average over the days before it (counted from the
 * jobs table). Raised once per tenant and hour (the subject is the hour).
 */
export function submissionBurst(input: {
  tenantId: string;
  hourStart: Date;
  now: Date;
  inHour: number;
  inHistory: number;
}): AnomalyFinding | null {
  const hourlyAverage = input.inHistory / (HISTORY_DAYS * 24);
  if (input.inHour < BURST_MIN_SUBMISSIONS || input.inHour <= BURST_FACTOR * hourlyAverage) return null;
  const hour = input.hourStart.toISOString().slice(0, 13);
  return {
    rule: SUBMISSION_BURST.flag,
    tenantId: input.tenantId,
    subject: `hour:${hour}`,
    jobId: null,
    evidence: [
      {
        kind: "submissions_in_hour",
        detail: `${input.inHour} jobs accepted between ${input.hourStart.toISOString()} and ${input.now.toISOString()}`,
        reference: `tenant:${input.tenantId}`,
        observed_at: input.now.toISOString(),
      },
      {
        kind: "submission_history",
        detail: `${input.inHistory} jobs in the ${HISTORY_DAYS} days before: ${hourlyAverage.toFixed(2)} per hour on average (the burst is ${hourlyAverage === 0 ? "unbounded" : `${(input.inHour / hourlyAverage).toFixed(1)} ×`} that)`,
        reference: `tenant:${input.tenantId}`,
        observed_at: input.now.toISOString(),
      },
    ],
  };
}
