import type { Selectable } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";
import type { CliTokensTable } from "../schema.js";

export type CliTokenRow = Omit<Selectable<CliTokensTable>, "token_hash">;

/** One page of a person's own CLI tokens in a tenant, live and revoked, newest first. */
export async function listCliTokens(
  target: StorageOrTransaction,
  input: { tenantId: string; personId: string; limit: number; cursor?: string | null },
): Promise<KeysetPage<CliTokenRow>> {
  const query = executorOf(target)
    .selectFrom("cli_tokens")
    .select([
      "id",
      "tenant_id",
      "person_id",
      "requesting_host",
      "created_at",
      "last_used_at",
      "revoked_at",
      "revoked_by",
    ])
    .where("tenant_id", "=", input.tenantId)
    .where("person_id", "=", input.personId);
  return fetchKeysetPage(query, {
    sort: [
      ["created_at", "desc", "text"],
      ["id", "desc", "text"],
    ],
    limit: input.limit,
    cursor: input.cursor,
  });
}
