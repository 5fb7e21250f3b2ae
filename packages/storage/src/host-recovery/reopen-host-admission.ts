import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { hostPlacementSubject, JOB_CHANNELS, notifyAtCommit } from "../notifications/job-notices.js";

/**
 * Reopens a host's admission that an impairment closed (a conditional write on it being
 * closed), moving the host operation revision on. The operator's drain is separate and stays.
 */
export async function reopenHostAdmission(target: StorageOrTransaction, input: { hostId: string }): Promise<boolean> {
  const db = executorOf(target);
  const reopened = await db
    .updateTable("hosts")
    .set({
      admission_closed_by: null,
      admission_closed_at: null,
      admission_closure_reason: null,
      operation_revision: sql<number>`operation_revision + 1`,
    })
    .where("id", "=", input.hostId)
    .where("admission_closed_at", "is not", null)
    .executeTakeFirst();
  if (Number(reopened.numUpdatedRows) === 0) return false;
  // The host may take work again: its waiting claim reads the queue when this commits.
  await notifyAtCommit(db, JOB_CHANNELS.placement, hostPlacementSubject(input.hostId));
  return true;
}
