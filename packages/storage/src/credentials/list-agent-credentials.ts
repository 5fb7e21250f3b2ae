import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";
import type { AgentCredentialRow } from "./agent-credential.js";

/** One page of the tenant's agent credentials, live and revoked, newest first. */
export async function listAgentCredentials(
  target: StorageOrTransaction,
  input: { tenantId: string; limit: number; cursor?: string | null },
): Promise<KeysetPage<AgentCredentialRow>> {
  const query = executorOf(target).selectFrom("agent_credentials").selectAll().where("tenant_id", "=", input.tenantId);
  return fetchKeysetPage(query, {
    sort: [
      ["created_at", "desc", "text"],
      ["id", "desc", "integer"],
    ],
    limit: input.limit,
    cursor: input.cursor,
  });
}
