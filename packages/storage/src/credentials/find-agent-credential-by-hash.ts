import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { AgentCredentialRow } from "./agent-credential.js";

export async function findAgentCredentialByHash(
  target: StorageOrTransaction,
  tokenHash: string,
): Promise<AgentCredentialRow | undefined> {
  return executorOf(target)
    .selectFrom("agent_credentials")
    .selectAll()
    .where("token_hash", "=", tokenHash)
    .executeTakeFirst();
}
