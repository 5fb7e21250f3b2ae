import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Cleans up uploads that expired unclaimed: releases the parts they held and marks them
 * cleaned, which is when their bytes stop counting toward the tenant's reservations. The
 * upload row stays (status still reads it, as expired; a reservation naming its key is `gone`).
 * The tenant's dedupe index keeps the digests, so a later upload can still reuse the bytes.
 * Each upload is cleaned in its own transaction with a conditional write (a claim that won the
 * race leaves it alone), so any server process may run this at any time.
 */
export async function cleanupExpiredUploads(storage: Storage, now: Date, limit = 100): Promise<number> {
  const at = formatTimestamp(now);
  const expired = await storage.db
    .selectFrom("source_uploads")
    .select(["tenant_id", "upload"])
    .where("cleaned_at", "is", null)
    .where("claimed_job", "is", null)
    .where("expires_at", "<=", at)
    .orderBy("expires_at")
    .limit(limit)
    .execute();
  let cleaned = 0;
  for (const row of expired) {
    const done = await storage.transaction(async (trx) => {
      const marked = await trx
        .updateTable("source_uploads")
        .set({ cleaned_at: at })
        .where("tenant_id", "=", row.tenant_id)
        .where("upload", "=", row.upload)
        .where("cleaned_at", "is", null)
        .where("claimed_job", "is", null)
        .where("expires_at", "<=", at)
        .executeTakeFirst();
      if (Number(marked.numUpdatedRows) !== 1) return false;
      await trx
        .deleteFrom("source_upload_parts")
        .where("tenant_id", "=", row.tenant_id)
        .where("upload", "=", row.upload)
        .execute();
      return true;
    });
    if (done) cleaned++;
  }
  return cleaned;
}
