import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Records a poll and says whether it came too soon. The UPDATE only matches when the
 * previous poll is at least `interval_seconds` old, so two racing polls cannot both
 * count as on time. A too-fast poll slows the device down by 5 seconds (RFC 8628 §3.5).
 */
export async function recordDevicePoll(
  target: StorageOrTransaction,
  input: { deviceCodeHash: string; now: Date; earliestOnTime: Date },
): Promise<"on_time" | "too_fast"> {
  const db = executorOf(target);
  const now = formatTimestamp(input.now);
  const onTime = await db
    .updateTable("device_authorizations")
    .set({ last_polled_at: now })
    .where("device_code_hash", "=", input.deviceCodeHash)
    .where((eb) =>
      eb.or([eb("last_polled_at", "is", null), eb("last_polled_at", "<=", formatTimestamp(input.earliestOnTime))]),
    )
    .executeTakeFirst();
  if (onTime.numUpdatedRows > 0n) return "on_time";
  await db
    .updateTable("device_authorizations")
    .set((eb) => ({ last_polled_at: now, interval_seconds: eb("interval_seconds", "+", 5) }))
    .where("device_code_hash", "=", input.deviceCodeHash)
    .execute();
  return "too_fast";
}
