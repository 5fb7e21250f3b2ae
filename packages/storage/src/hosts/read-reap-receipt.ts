import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type HostReceiptRecord, hostReceiptOf } from "./list-host-receipts.js";

/** The newest reap receipt of one placement, or undefined when none was written. */
export async function readReapReceipt(
  target: StorageOrTransaction,
  input: { jobId: string; vmId: string },
): Promise<HostReceiptRecord | undefined> {
  const row = await executorOf(target)
    .selectFrom("host_receipts")
    .selectAll()
    .where("job_id", "=", input.jobId)
    .where("vm_id", "=", input.vmId)
    .where("kind", "=", "reap")
    .orderBy("at", "desc")
    .orderBy("sequence", "desc")
    .executeTakeFirst();
  return row === undefined ? undefined : hostReceiptOf(row);
}
