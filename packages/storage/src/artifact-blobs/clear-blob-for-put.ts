import type { Storage } from "../dialect.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";
import { ARTIFACT_BLOB_MARK_LEASE_SECONDS } from "./artifact-blob-timing.js";

/**
 * What a put must find unchanged once its bytes are written (`confirmBlobPut`): the digest
 * still `held`, or still the same sweep's `deleted` tombstone or stale mark.
 */
export type PutTicket =
  | { readonly state: "held" }
  | { readonly state: "deleted" | "deleting"; readonly markToken: string | null };

/**
 * `write`: put the bytes, then confirm with the ticket (none: nothing to confirm). `wait`: a
 * sweep is deleting the digest; ask again later.
 */
export type PutClearance = { readonly kind: "write"; readonly ticket: PutTicket | null } | { readonly kind: "wait" };

/**
 * Asked before every blob put (`SweepFencedBlobStore`): may the bytes of `sha256` be written now?
 *
 * - No row (never published as an artifact) or `shared` (never swept): write, nothing to
 *   confirm — one unlocked read, the cost every put pays.
 * - `held`: the row is locked (`FOR UPDATE`; SQLite's one writer) — the lock the sweep's mark and
 *   every publication take — and touched, so its grace restarts and the sweep does not mark it
 *   while the record naming the bytes is still to come. Write, then confirm it is still `held`.
 * - `deleted`, or a `deleting` mark older than the lease (its sweep died or its delete failed):
 *   write the bytes back, then confirm, which makes the row `held` only if no sweep touched it in
 *   between. Until then it stays swept: `held` always means the bytes are there, which is what
 *   a publication relies on (record-published-blobs.ts).
 * - `deleting` under a live mark: its delete may land at any moment, after a put that (finding
 *   the blob still there) skipped writing. Wait.
 */
export async function clearBlobForPut(
  storage: Storage,
  input: { sha256: string; now: Date; leaseSeconds?: number },
): Promise<PutClearance> {
  const seen = await storage.db
    .selectFrom("artifact_blobs")
    .select("state")
    .where("sha256", "=", input.sha256)
    .executeTakeFirst();
  if (seen === undefined || seen.state === "shared") return { kind: "write", ticket: null };
  const now = formatTimestamp(input.now);
  const staleBefore = formatTimestamp(addSeconds(input.now, -(input.leaseSeconds ?? ARTIFACT_BLOB_MARK_LEASE_SECONDS)));
  return storage.transaction(async (trx): Promise<PutClearance> => {
    let query = trx
      .selectFrom("artifact_blobs")
      .select(["state", "touched_at", "marked_at", "mark_token"])
      .where("sha256", "=", input.sha256);
    if (storage.capabilities.rowLocks) query = query.forUpdate();
    const row = await query.executeTakeFirst();
    if (row === undefined || row.state === "shared") return { kind: "write", ticket: null };
    if (row.state === "deleting" && (row.marked_at === null || row.marked_at >= staleBefore)) return { kind: "wait" };
    if (row.state !== "held") return { kind: "write", ticket: { state: row.state, markToken: row.mark_token } };
    // Never back in time: another server's clock may be behind the one that touched it last.
    if (row.touched_at < now) {
      await trx.updateTable("artifact_blobs").set({ touched_at: now }).where("sha256", "=", input.sha256).execute();
    }
    return { kind: "write", ticket: { state: "held" } };
  });
}
