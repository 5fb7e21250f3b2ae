import type { Storage } from "../dialect.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";
import { ARTIFACT_BLOB_MARK_LEASE_SECONDS } from "./artifact-blob-timing.js";
import type { PutTicket } from "./clear-blob-for-put.js";

/**
 * After a put wrote the bytes `clearBlobForPut` cleared: `confirmed` when nothing can have
 * deleted them since — the row, locked (`FOR UPDATE`; SQLite's one writer), is `held` or
 * `shared`, or is still the very tombstone or stale mark the ticket names (no sweep came in
 * between, since every mark gets a token of its own), which it then makes `held`: the bytes are
 * back. `retry` when a sweep marked the digest after the clearance: its delete may have taken
 * the bytes just written, so the put starts over.
 */
export async function confirmBlobPut(
  storage: Storage,
  input: { sha256: string; ticket: PutTicket; now: Date; leaseSeconds?: number },
): Promise<"confirmed" | "retry"> {
  const now = formatTimestamp(input.now);
  const staleBefore = formatTimestamp(addSeconds(input.now, -(input.leaseSeconds ?? ARTIFACT_BLOB_MARK_LEASE_SECONDS)));
  return storage.transaction(async (trx) => {
    let query = trx
      .selectFrom("artifact_blobs")
      .select(["state", "touched_at", "marked_at", "mark_token"])
      .where("sha256", "=", input.sha256);
    if (storage.capabilities.rowLocks) query = query.forUpdate();
    const row = await query.executeTakeFirst();
    // Held: the last writer to bring the bytes back confirmed after writing them; shared: never swept.
    if (row === undefined || row.state === "held" || row.state === "shared") return "confirmed";
    const ticket = input.ticket;
    if (ticket.state === "held" || row.mark_token !== ticket.markToken) return "retry";
    if (row.state === "deleting" && row.marked_at !== null && row.marked_at >= staleBefore) return "retry";
    await trx
      .updateTable("artifact_blobs")
      .set({ state: "held", marked_at: null, mark_token: null, ...(row.touched_at < now ? { touched_at: now } : {}) })
      .where("sha256", "=", input.sha256)
      .execute();
    return "confirmed";
  });
}
