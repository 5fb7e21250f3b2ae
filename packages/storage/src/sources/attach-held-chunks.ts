import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Digests looked up per statement (well under both engines' bound-parameter limits). */
const BATCH = 500;

/**
 * Attaches to a freshly reserved upload, as `reused`, every declared part whose digest (and
 * length) the tenant already holds in `source_chunks` — the dedupe sources.chunk.check does
 * per part, done once for the whole manifest, so the reservation's `missing_parts` already
 * leaves them out and a client sends the rest without asking part by part. Only the tenant's
 * own holdings count (never another tenant's). Parts already held by the upload are left as
 * they are (a primary-key conflict does nothing), so a concurrent chunk request is harmless.
 * Returns how many parts were attached.
 */
export async function attachHeldChunks(
  target: StorageOrTransaction,
  input: {
    tenantId: string;
    upload: string;
    parts: readonly { part: number; sha256: string; bytes: number }[];
    now: Date;
  },
): Promise<number> {
  const db = executorOf(target);
  const digests = [...new Set(input.parts.map((p) => p.sha256))];
  const held = new Map<string, number>();
  for (let i = 0; i < digests.length; i += BATCH) {
    const rows = await db
      .selectFrom("source_chunks")
      .select(["sha256", "bytes"])
      .where("tenant_id", "=", input.tenantId)
      .where("sha256", "in", digests.slice(i, i + BATCH))
      .execute();
    for (const row of rows) held.set(row.sha256, Number(row.bytes));
  }
  const attach = input.parts.filter((p) => held.get(p.sha256) === p.bytes);
  const at = formatTimestamp(input.now);
  for (let i = 0; i < attach.length; i += BATCH) {
    await db
      .insertInto("source_upload_parts")
      .values(
        attach.slice(i, i + BATCH).map((p) => ({
          tenant_id: input.tenantId,
          upload: input.upload,
          part: p.part,
          sha256: p.sha256,
          bytes: p.bytes,
          origin: "reused" as const,
          received_at: at,
        })),
      )
      .onConflict((c) => c.columns(["tenant_id", "upload", "part"]).doNothing())
      .execute();
  }
  return attach.length;
}
