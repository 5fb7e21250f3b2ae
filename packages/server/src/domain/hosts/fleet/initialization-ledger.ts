import { HOST_INITIALIZATION_STEPS, type HostInitializationStepOutcome } from "@kiln/contract";
import type { InitializationLedgerStep } from "@kiln/storage";

/** The ledger of an initialization no host has taken yet: every step pending. */
export function pendingLedger(): InitializationLedgerStep[] {
  return HOST_INITIALIZATION_STEPS.map((step) => ({
    step,
    state: "pending",
    destructive: false,
    started_at: null,
    finished_at: null,
  }));
}

/**
 * The operator's ledger of what a host reported, and where the initialization stands: `failed`
 * once a step failed and none runs any more, `succeeded` once every step succeeded, otherwise
 * `running`. No step of an initialization destroys anything.
 */
export function ledgerOfReport(steps: readonly HostInitializationStepOutcome[]): {
  steps: InitializationLedgerStep[];
  state: "running" | "succeeded" | "failed";
  failure: string | null;
} {
  const ledger = steps.map((s) => ({
    step: s.step,
    state: s.state,
    destructive: false,
    started_at: s.startedAt,
    finished_at: s.finishedAt,
    ...(s.detail === "" ? {} : { detail: s.detail }),
  }));
  const failed = steps.find((s) => s.state === "failed");
  const unfinished = steps.some((s) => s.state === "pending" || s.state === "running");
  const complete = steps.length === HOST_INITIALIZATION_STEPS.length;
  if (failed !== undefined && !unfinished) {
    return { steps: ledger, state: "failed", failure: `step ${failed.step} failed: ${failed.detail}` };
  }
  if (complete && steps.every((s) => s.state === "succeeded"))
    return { steps: ledger, state: "succeeded", failure: null };
  return { steps: ledger, state: "running", failure: null };
}
