import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

export async function createSignInLink(
  target: StorageOrTransaction,
  input: { tokenHash: string; tenantId: string; personId: string; expiresAt: Date },
  now: Date,
): Promise<void> {
  await executorOf(target)
    .insertInto("sign_in_links")
    .values({
      token_hash: input.tokenHash,
      tenant_id: input.tenantId,
      person_id: input.personId,
      created_at: formatTimestamp(now),
      expires_at: formatTimestamp(input.expiresAt),
      used_at: null,
    })
    .execute();
}
