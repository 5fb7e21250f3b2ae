import { executorOf, type StorageOrTransaction } from "../executor.js";
import { newCliTokenId } from "../ids.js";
import { formatTimestamp } from "../timestamps.js";

/** Records a person's CLI device token by its hash; returns the token's public id. */
export async function issueCliToken(
  target: StorageOrTransaction,
  input: { tenantId: string; personId: string; tokenHash: string; requestingHost: string },
  now: Date,
): Promise<{ id: string }> {
  const id = newCliTokenId();
  await executorOf(target)
    .insertInto("cli_tokens")
    .values({
      id,
      tenant_id: input.tenantId,
      person_id: input.personId,
      token_hash: input.tokenHash,
      requesting_host: input.requestingHost,
      created_at: formatTimestamp(now),
      last_used_at: null,
      revoked_at: null,
      revoked_by: null,
    })
    .execute();
  return { id };
}
