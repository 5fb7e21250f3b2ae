import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Records a new pending device authorization; false if the user code is already taken. */
export async function startDeviceAuthorization(
  target: StorageOrTransaction,
  input: { deviceCodeHash: string; userCode: string; requestingHost: string; intervalSeconds: number; expiresAt: Date },
  now: Date,
): Promise<boolean> {
  const result = await executorOf(target)
    .insertInto("device_authorizations")
    .values({
      device_code_hash: input.deviceCodeHash,
      user_code: input.userCode,
      requesting_host: input.requestingHost,
      state: "pending",
      interval_seconds: input.intervalSeconds,
      created_at: formatTimestamp(now),
      expires_at: formatTimestamp(input.expiresAt),
      last_polled_at: null,
      approved_tenant_id: null,
      approved_by: null,
      approved_at: null,
      cli_token_id: null,
    })
    .onConflict((c) => c.column("user_code").doNothing())
    .executeTakeFirst();
  return result.numInsertedOrUpdatedRows === 1n;
}
