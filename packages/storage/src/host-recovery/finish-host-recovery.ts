import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Finishes a running recovery with its outcome (a conditional write on `state = 'running'`),
 * moving the host operation revision on. Steps never begun are marked `skipped`.
 */
export async function finishHostRecovery(
  target: StorageOrTransaction,
  input: { hostId: string; recoveryId: string; outcome: "succeeded" | "failed"; detail: string | null; now: Date },
): Promise<boolean> {
  const db = executorOf(target);
  const now = formatTimestamp(input.now);
  const finished = await db
    .updateTable("host_recoveries")
    .set({ state: input.outcome, finished_at: now, outcome_detail: input.detail })
    .where("id", "=", input.recoveryId)
    .where("host_id", "=", input.hostId)
    .where("state", "=", "running")
    .executeTakeFirst();
  if (Number(finished.numUpdatedRows) === 0) return false;
  await db
    .updateTable("host_recovery_steps")
    .set({ state: "skipped" })
    .where("recovery_id", "=", input.recoveryId)
    .where("state", "in", ["pending", "awaiting_approval"])
    .execute();
  await db
    .updateTable("hosts")
    .set({ operation_revision: sql<number>`operation_revision + 1` })
    .where("id", "=", input.hostId)
    .execute();
  return true;
}
