import {
  type Clock,
  type HostInitializationOrder,
  type HostInitializationStepOutcome,
  messageOf,
} from "@kiln/contract";
import type { InitializationStep } from "../executor/host-isolation.js";
import type { HostProtocol } from "./host-protocol.js";

/**
 * Runs an operator-started initialization on this host, step by step in the order its
 * isolation names them (`HostIsolation.initializationSteps`), reporting the ledger to the control plane as each step
 * starts and ends (so observe shows progress, and each step's outcome is its receipt entry).
 * A failed step leaves the later ones `skipped`: a host whose sandbox user is missing cannot
 * usefully probe bubblewrap as that user. The steps are idempotent checks and preparations, so
 * a host that restarts mid-way runs the whole initialization again. Answers `stale` as soon as
 * the control plane says the operation is no longer this host's open one.
 */
export async function runHostInitialization(
  deps: {
    readonly hostId: string;
    readonly protocol: HostProtocol;
    readonly clock: Clock;
    readonly steps: readonly InitializationStep[];
  },
  order: HostInitializationOrder,
): Promise<"finished" | "stale"> {
  const steps: HostInitializationStepOutcome[] = deps.steps.map((step) => ({
    step: step.name,
    state: "pending",
    startedAt: null,
    finishedAt: null,
    detail: "",
  }));
  const report = () => deps.protocol.reportInitialization({ hostId: deps.hostId, operation: order.operation, steps });
  let failed: string | null = null;
  for (const [index, step] of steps.entries()) {
    if (failed !== null) {
      steps[index] = { ...step, state: "skipped", detail: `not run: step ${failed} failed` };
      continue;
    }
    const startedAt = deps.clock.now().toISOString();
    steps[index] = { ...step, state: "running", startedAt };
    if ((await report()) === "stale") return "stale";
    try {
      const detail = await (deps.steps[index] as InitializationStep).run(order);
      steps[index] = { ...step, state: "succeeded", startedAt, finishedAt: deps.clock.now().toISOString(), detail };
    } catch (error) {
      failed = step.step;
      steps[index] = {
        ...step,
        state: "failed",
        startedAt,
        finishedAt: deps.clock.now().toISOString(),
        detail: messageOf(error).slice(0, 4000),
      };
    }
  }
  return (await report()) === "stale" ? "stale" : "finished";
}
