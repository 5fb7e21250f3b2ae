import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { HostReceiptEntry } from "./record-host-receipt.js";

/** A recorded host receipt. */
export interface HostReceiptRecord {
  id: string;
  hostId: string;
  kind: string;
  jobId: string | null;
  vmId: string | null;
  actor: string;
  at: string;
  summary: string;
  entries: HostReceiptEntry[];
}

/** A host's receipts, newest first, at most `limit`. */
export async function listHostReceipts(
  target: StorageOrTransaction,
  input: { hostId: string; limit: number },
): Promise<HostReceiptRecord[]> {
  const rows = await executorOf(target)
    .selectFrom("host_receipts")
    .selectAll()
    .where("host_id", "=", input.hostId)
    .orderBy("at", "desc")
    .orderBy("sequence", "desc")
    .limit(input.limit)
    .execute();
  return rows.map(hostReceiptOf);
}

/** A receipt row as the operator reads it. */
export function hostReceiptOf(row: {
  id: string;
  host_id: string;
  kind: string;
  job_id: string | null;
  vm_id: string | null;
  actor: string;
  at: string;
  summary: string;
  entries: string;
}): HostReceiptRecord {
  return {
    id: row.id,
    hostId: row.host_id,
    kind: row.kind,
    jobId: row.job_id,
    vmId: row.vm_id,
    actor: row.actor,
    at: row.at,
    summary: row.summary,
    entries: JSON.parse(row.entries) as HostReceiptEntry[],
  };
}
