import type { OperatorAnomaly } from "@kiln/contract";
import type { Static } from "@sinclair/typebox";

export type EvidenceItem = Static<typeof OperatorAnomaly>["evidence"][number];

/** A flag a rule would raise: what it saw (the subject it is raised once for) and the evidence. */
export interface AnomalyFinding {
  readonly rule: string;
  readonly tenantId: string;
  /** What the flag is about, unique per rule and tenant (a job's attempt, a window). */
  readonly subject: string;
  readonly jobId: string | null;
  readonly evidence: readonly EvidenceItem[];
}

/** Each rule's flag name and its description with its thresholds, for the operator's list. */
export interface AnomalyRuleDescription {
  readonly flag: string;
  readonly description: string;
}
