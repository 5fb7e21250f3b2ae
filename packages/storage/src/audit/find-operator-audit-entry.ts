import { executorOf, type StorageOrTransaction } from "../executor.js";

/** Whether the operator audit holds an entry with this sequence. */
export async function operatorAuditEntryExists(target: StorageOrTransaction, sequence: number): Promise<boolean> {
  const row = await executorOf(target)
    .selectFrom("operator_audit_entries")
    .select("sequence")
    .where("sequence", "=", sequence)
    .executeTakeFirst();
  return row !== undefined;
}
