import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type HostInitializationRecord, hostInitializationOf } from "./host-initialization-record.js";

/** A host's newest initialization, or undefined when none was ever started. */
export async function readHostInitialization(
  target: StorageOrTransaction,
  input: { hostId: string },
): Promise<HostInitializationRecord | undefined> {
  const row = await executorOf(target)
    .selectFrom("host_initializations")
    .selectAll()
    .where("host_id", "=", input.hostId)
    .orderBy("ordinal", "desc")
    .executeTakeFirst();
  return row === undefined ? undefined : hostInitializationOf(row);
}
