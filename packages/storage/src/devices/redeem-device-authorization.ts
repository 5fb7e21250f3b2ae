import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Moves an approved authorization to redeemed, recording the CLI token issued for it.
 * Only one caller's conditional UPDATE can match `state = 'approved'`, so the token is
 * issued exactly once even when two processes poll at the same instant; run it in the
 * same transaction as the token's insert so a losing poll leaves no token behind.
 */
export async function redeemDeviceAuthorization(
  target: StorageOrTransaction,
  input: { deviceCodeHash: string; cliTokenId: string },
): Promise<boolean> {
  const result = await executorOf(target)
    .updateTable("device_authorizations")
    .set({ state: "redeemed", cli_token_id: input.cliTokenId })
    .where("device_code_hash", "=", input.deviceCodeHash)
    .where("state", "=", "approved")
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
