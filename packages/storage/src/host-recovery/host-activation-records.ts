import { createHash } from "node:crypto";

/** One step of a host operator's activation, as its ledger keeps it. */
export interface HostActivationStepRecord {
  step: string;
  state: "succeeded" | "failed" | "skipped";
  startedAt: string;
  finishedAt: string;
  detail: string | null;
}

/** One start of a host's host operator on a boot: its plan, its ledger and, once finished, its receipt. */
export interface HostActivationRecord {
  operation: string;
  hostId: string;
  boot: string;
  instance: string;
  startedAt: string;
  plan: string[];
  steps: HostActivationStepRecord[];
  receipt: { outcome: "succeeded" | "failed"; finishedAt: string; detail: string | null } | null;
  writtenAt: string;
}

/**
 * The steps a host operator runs as it starts, in order; the last is the control plane
 * recording its readiness, which finishes the activation.
 */
export const HOST_ACTIVATION_PLAN = [
  "load_provisioning_bundle",
  "load_recovery_binding",
  "check_provider_identity",
  "record_readiness",
] as const;

/**
 * An activation's operation identifier: stable for one start (host, boot, instance, start
 * instant), so a retried readiness report names the same activation; within the operation
 * pattern `[a-z0-9][a-z0-9-]{0,62}`.
 */
export function hostActivationOperationOf(start: {
  hostId: string;
  boot: string;
  instance: string;
  startedAt: string;
}): string {
  const digest = createHash("sha256")
    .update([start.hostId, start.boot, start.instance, start.startedAt].join("\n"))
    .digest("hex");
  return `activation-${digest.slice(0, 24)}`;
}
