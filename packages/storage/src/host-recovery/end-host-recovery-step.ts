import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Records a begun step's end and outcome in the ledger. False when no such running step exists. */
export async function endHostRecoveryStep(
  target: StorageOrTransaction,
  input: {
    hostId: string;
    recoveryId: string;
    position: number;
    outcome: "succeeded" | "failed" | "skipped";
    detail: string | null;
    now: Date;
  },
): Promise<boolean> {
  const db = executorOf(target);
  const owned = await db
    .selectFrom("host_recoveries")
    .select("id")
    .where("id", "=", input.recoveryId)
    .where("host_id", "=", input.hostId)
    .where("state", "=", "running")
    .executeTakeFirst();
  if (owned === undefined) return false;
  const now = formatTimestamp(input.now);
  const ended = await db
    .updateTable("host_recovery_steps")
    .set((eb) => ({
      state: input.outcome,
      started_at: eb.fn.coalesce("started_at", eb.val(now)),
      finished_at: now,
      detail: input.detail,
    }))
    .where("recovery_id", "=", input.recoveryId)
    .where("position", "=", input.position)
    .where("state", "in", ["running", "pending"])
    .executeTakeFirst();
  return Number(ended.numUpdatedRows) > 0;
}
