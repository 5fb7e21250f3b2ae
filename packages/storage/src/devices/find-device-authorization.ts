import type { Selectable } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { DeviceAuthorizationsTable } from "../schema.js";

export type DeviceAuthorizationRow = Selectable<DeviceAuthorizationsTable>;

export async function findDeviceAuthorization(
  target: StorageOrTransaction,
  by: { userCode: string } | { deviceCodeHash: string },
): Promise<DeviceAuthorizationRow | undefined> {
  const query = executorOf(target).selectFrom("device_authorizations").selectAll();
  return (
    "userCode" in by
      ? query.where("user_code", "=", by.userCode)
      : query.where("device_code_hash", "=", by.deviceCodeHash)
  ).executeTakeFirst();
}
