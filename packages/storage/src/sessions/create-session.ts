import { executorOf, type StorageOrTransaction } from "../executor.js";
import { newSessionId } from "../ids.js";
import { formatTimestamp } from "../timestamps.js";

/** Records a session by the hash of its cookie value; returns its handle. */
export async function createSession(
  target: StorageOrTransaction,
  input: {
    kind: "person" | "operator";
    tokenHash: string;
    tenantId: string | null;
    personId: string | null;
    expiresAt: Date;
  },
  now: Date,
): Promise<{ id: string }> {
  const id = newSessionId();
  await executorOf(target)
    .insertInto("sessions")
    .values({
      id,
      token_hash: input.tokenHash,
      kind: input.kind,
      tenant_id: input.tenantId,
      person_id: input.personId,
      created_at: formatTimestamp(now),
      expires_at: formatTimestamp(input.expiresAt),
      ended_at: null,
    })
    .execute();
  return { id };
}
