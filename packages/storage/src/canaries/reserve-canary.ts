import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Reserves the canary of `hostId` for the slot starting `dueAt`, before it is submitted: its
 * id becomes the job's submission key, and insert-job pins a job with that key to the host.
 * Answers false when the slot's canary exists already — another kiln-server (or an earlier
 * pass) reserved it; the unique (host_id, due_at) index decides, with ON CONFLICT DO NOTHING so
 * a lost race aborts nothing.
 */
export async function reserveCanary(
  target: StorageOrTransaction,
  input: { id: string; tenantId: string; hostId: string; dueAt: Date; now: Date },
): Promise<boolean> {
  const inserted = await executorOf(target)
    .insertInto("canaries")
    .values({
      id: input.id,
      tenant_id: input.tenantId,
      host_id: input.hostId,
      due_at: formatTimestamp(input.dueAt),
      created_at: formatTimestamp(input.now),
      submitted_at: null,
      job_id: null,
      submission_error: null,
    })
    .onConflict((c) => c.columns(["host_id", "due_at"]).doNothing())
    .executeTakeFirst();
  return inserted.numInsertedOrUpdatedRows === 1n;
}
