import { executorOf, type StorageOrTransaction } from "../executor.js";
import { DESTRUCTIVE_RECOVERY_STEPS } from "./host-recovery-records.js";

/**
 * Records a running recovery's plan as its pending ledger, once: a plan already recorded stays
 * (the host operator resuming a recovery sends it again). Whether a step is destructive is
 * decided here from its name, never taken from the host.
 */
export async function recordHostRecoveryPlan(
  target: StorageOrTransaction,
  input: { hostId: string; recoveryId: string; steps: readonly string[] },
): Promise<"recorded" | "kept" | "not_found"> {
  const db = executorOf(target);
  const recovery = await db
    .selectFrom("host_recoveries")
    .select("state")
    .where("id", "=", input.recoveryId)
    .where("host_id", "=", input.hostId)
    .executeTakeFirst();
  if (recovery === undefined || recovery.state !== "running") return "not_found";
  const existing = await db
    .selectFrom("host_recovery_steps")
    .select("position")
    .where("recovery_id", "=", input.recoveryId)
    .executeTakeFirst();
  if (existing !== undefined) return "kept";
  if (input.steps.length === 0) return "recorded";
  await db
    .insertInto("host_recovery_steps")
    .values(
      input.steps.map((step, position) => ({
        recovery_id: input.recoveryId,
        position,
        step,
        destructive: (DESTRUCTIVE_RECOVERY_STEPS as readonly string[]).includes(step) ? 1 : 0,
        state: "pending" as const,
        started_at: null,
        finished_at: null,
        detail: null,
      })),
    )
    .execute();
  return "recorded";
}
