import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Writes coalesced last-use times: one UPDATE per credential that was used since the
 * last flush, and never backwards (another process may have recorded a later use).
 */
export async function recordLastUsed(
  target: StorageOrTransaction,
  uses: { cliTokens: ReadonlyMap<string, string>; agentCredentialHashes: ReadonlyMap<string, string> },
): Promise<void> {
  const db = executorOf(target);
  for (const [id, at] of uses.cliTokens) {
    await db
      .updateTable("cli_tokens")
      .set({ last_used_at: at })
      .where("id", "=", id)
      .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<", at)]))
      .execute();
  }
  for (const [tokenHash, at] of uses.agentCredentialHashes) {
    await db
      .updateTable("agent_credentials")
      .set({ last_used_at: at })
      .where("token_hash", "=", tokenHash)
      .where((eb) => eb.or([eb("last_used_at", "is", null), eb("last_used_at", "<", at)]))
      .execute();
  }
}
