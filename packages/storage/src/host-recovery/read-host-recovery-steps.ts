import type { Selectable } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { HostRecoveriesTable } from "../schema.js";
import { type HostRecoveryRecord, recoveryRecordOf } from "./host-recovery-records.js";

/** Recovery rows with their step ledgers, in the rows' order. */
export async function withRecoverySteps(
  target: StorageOrTransaction,
  rows: readonly Selectable<HostRecoveriesTable>[],
): Promise<HostRecoveryRecord[]> {
  if (rows.length === 0) return [];
  const steps = await executorOf(target)
    .selectFrom("host_recovery_steps")
    .selectAll()
    .where(
      "recovery_id",
      "in",
      rows.map((r) => r.id),
    )
    .orderBy("recovery_id")
    .orderBy("position")
    .execute();
  return rows.map((row) =>
    recoveryRecordOf(
      row,
      steps.filter((s) => s.recovery_id === row.id),
    ),
  );
}
