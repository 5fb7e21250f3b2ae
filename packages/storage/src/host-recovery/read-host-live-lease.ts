import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * The latest lease expiry among the host's running attempts, or null when it runs none. A host
 * renews its attempts' leases with every attempt heartbeat, so while one is unexpired the host
 * is alive even when it is too busy to claim (claims and health reports are its other signs).
 */
export async function readHostLiveLease(target: StorageOrTransaction, hostId: string): Promise<string | null> {
  const row = await executorOf(target)
    .selectFrom("attempts")
    .select((eb) => eb.fn.max("lease_expires_at").as("until"))
    .where("host_id", "=", hostId)
    .where("state", "=", "running")
    .executeTakeFirst();
  return row?.until ?? null;
}
