import type { Selectable } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { SessionsTable } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

/** The session whose cookie hashes to this, if it is of `kind`, not ended and not expired. */
export async function findLiveSession(
  target: StorageOrTransaction,
  input: { tokenHash: string; kind: "person" | "operator"; now: Date },
): Promise<Selectable<SessionsTable> | undefined> {
  return executorOf(target)
    .selectFrom("sessions")
    .selectAll()
    .where("token_hash", "=", input.tokenHash)
    .where("kind", "=", input.kind)
    .where("ended_at", "is", null)
    .where("expires_at", ">", formatTimestamp(input.now))
    .executeTakeFirst();
}
