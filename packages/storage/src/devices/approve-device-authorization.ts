import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Approves a pending, unexpired authorization for the person in a tenant; false otherwise. */
export async function approveDeviceAuthorization(
  target: StorageOrTransaction,
  input: { userCode: string; tenantId: string; personId: string },
  at: Date,
): Promise<boolean> {
  const now = formatTimestamp(at);
  const result = await executorOf(target)
    .updateTable("device_authorizations")
    .set({ state: "approved", approved_tenant_id: input.tenantId, approved_by: input.personId, approved_at: now })
    .where("user_code", "=", input.userCode)
    .where("state", "=", "pending")
    .where("expires_at", ">", now)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
