import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import {
  HOST_ACTIVATION_PLAN,
  type HostActivationStepRecord,
  hostActivationOperationOf,
} from "./host-activation-records.js";

/**
 * Records one start of a host's host operator (an activation) as its readiness is recorded:
 * the steps it ran to become ready, then `record_readiness`, which the control plane finishes
 * now, and so the receipt — `failed` naming the first failed step, else `succeeded`. A retried
 * report of the same start rewrites the same activation (its operation is derived from the
 * start), which is then the most recently written. Returns the activation's operation.
 */
export async function recordHostActivation(
  target: StorageOrTransaction,
  input: {
    hostId: string;
    boot: string;
    instance: string;
    startedAt: string;
    /** The steps the host operator ran before reporting, in order. */
    steps: HostActivationStepRecord[];
    now: Date;
  },
): Promise<string> {
  const db = executorOf(target);
  const now = formatTimestamp(input.now);
  const operation = hostActivationOperationOf(input);
  const steps: HostActivationStepRecord[] = [
    ...input.steps,
    {
      step: "record_readiness",
      state: "succeeded",
      startedAt: now,
      finishedAt: now,
      detail: `instance ${input.instance}`,
    },
  ];
  const planned: readonly string[] = HOST_ACTIVATION_PLAN;
  // The plan is kiln's, in its order; a step a newer host operator runs beyond it is kept too.
  const plan = [...planned, ...steps.map((s) => s.step).filter((s) => !planned.includes(s))];
  const failed = steps.find((s) => s.state === "failed");
  const values = {
    boot: input.boot,
    instance: input.instance,
    started_at: input.startedAt,
    plan: JSON.stringify(plan),
    ledger: JSON.stringify(steps),
    outcome: failed === undefined ? "succeeded" : "failed",
    finished_at: now,
    receipt_detail: failed === undefined ? null : `${failed.step}: ${failed.detail ?? "failed"}`,
    written_at: now,
  };
  await db
    .insertInto("host_activations")
    .values({ operation, host_id: input.hostId, ...values })
    .onConflict((c) => c.column("operation").doUpdateSet(values))
    .execute();
  return operation;
}
