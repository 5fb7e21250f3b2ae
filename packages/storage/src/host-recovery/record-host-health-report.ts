import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** A kiln-host's health report: replaces the host's previous one (only the newest is kept). */
export async function recordHostHealthReport(
  target: StorageOrTransaction,
  input: {
    hostId: string;
    diskFreeBytes: number;
    diskTotalBytes: number;
    failedInitializationStep: string | null;
    now: Date;
  },
): Promise<void> {
  const values = {
    reported_at: formatTimestamp(input.now),
    disk_free_bytes: input.diskFreeBytes,
    disk_total_bytes: input.diskTotalBytes,
    failed_initialization_step: input.failedInitializationStep,
  };
  await executorOf(target)
    .insertInto("host_health_reports")
    .values({ host_id: input.hostId, ...values })
    .onConflict((c) => c.column("host_id").doUpdateSet(values))
    .execute();
}

/** The host's newest health report, or undefined when it never sent one. */
export async function readHostHealthReport(target: StorageOrTransaction, hostId: string) {
  const row = await executorOf(target)
    .selectFrom("host_health_reports")
    .selectAll()
    .where("host_id", "=", hostId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    reportedAt: row.reported_at,
    diskFreeBytes: Number(row.disk_free_bytes),
    diskTotalBytes: Number(row.disk_total_bytes),
    failedInitializationStep: row.failed_initialization_step,
  };
}
