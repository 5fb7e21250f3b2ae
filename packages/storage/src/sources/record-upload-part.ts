import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";
import { readUploadPart } from "./read-upload.js";
import type { SourceUploadPartRow, SourceUploadRow } from "./upload-row.js";

export interface UploadPart {
  readonly tenantId: string;
  readonly upload: string;
  readonly part: number;
  readonly sha256: string;
  readonly bytes: number;
  /** uploaded: the bytes were just sent (and stored); reused: the tenant already held them. */
  readonly origin: "uploaded" | "reused";
  readonly now: Date;
}

export type RecordUploadPartResult =
  | { readonly kind: "recorded"; readonly part: SourceUploadPartRow }
  /** The upload already held the part (a repeat, or a racing request won): compare its digest. */
  | { readonly kind: "held"; readonly part: SourceUploadPartRow }
  /** The upload no longer accepts parts (completed, or cleaned up), or does not exist. */
  | {
      readonly kind: "not_reserved";
      readonly upload: Pick<SourceUploadRow, "tenant_id" | "upload" | "state" | "cleaned_at"> | undefined;
    };

/**
 * Attaches a part to a reserved upload and records the digest among the tenant's chunks, in
 * one transaction, so a part is never held without the tenant's dedupe index knowing it.
 *
 * Locking: the upload must still be `reserved` and not cleaned up when the part is attached.
 * On PostgreSQL its row is locked FOR SHARE, which a concurrent completion's UPDATE waits for
 * (and vice versa), so no part is attached after completion decided; on SQLite the write lock
 * is held from the transaction's start. The part's primary key settles a race of two sends of
 * the same part: one inserts, the other reads what it inserted.
 */
export async function recordUploadPart(storage: Storage, input: UploadPart): Promise<RecordUploadPartResult> {
  const now = formatTimestamp(input.now);
  // Relaxed durability: a record lost to a power failure, like its blob (not fsynced either),
  // only means the client sends the part again; sources.complete commits durably.
  return storage.transaction(async (trx) => {
    // Not the manifest: the state is all this needs, and the manifest can be megabytes.
    let query = trx
      .selectFrom("source_uploads")
      .select(["tenant_id", "upload", "state", "cleaned_at"])
      .where("tenant_id", "=", input.tenantId)
      .where("upload", "=", input.upload);
    if (storage.capabilities.rowLocks) query = query.forShare();
    const upload = await query.executeTakeFirst();
    const held = await readUploadPart(trx, input);
    if (held !== undefined) return { kind: "held", part: held };
    if (upload === undefined || upload.state !== "reserved" || upload.cleaned_at !== null) {
      return { kind: "not_reserved", upload };
    }
    const inserted = await trx
      .insertInto("source_upload_parts")
      .values({
        tenant_id: input.tenantId,
        upload: input.upload,
        part: input.part,
        sha256: input.sha256,
        bytes: input.bytes,
        origin: input.origin,
        received_at: now,
      })
      .onConflict((c) => c.columns(["tenant_id", "upload", "part"]).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (inserted === undefined) {
      const winner = await readUploadPart(trx, input);
      if (winner === undefined) throw new Error(`part ${input.part} of ${input.upload} neither inserted nor held`);
      return { kind: "held", part: winner };
    }
    await trx
      .insertInto("source_chunks")
      .values({ tenant_id: input.tenantId, sha256: input.sha256, bytes: input.bytes, stored_at: now })
      .onConflict((c) => c.columns(["tenant_id", "sha256"]).doNothing())
      .execute();
    return { kind: "recorded", part: inserted };
  }, RELAXED);
}

const RELAXED = { durability: "relaxed" } as const;

/** Whether the tenant holds bytes with this digest (the dedupe index; never another tenant's). */
export async function findTenantChunk(
  storage: Storage,
  input: { tenantId: string; sha256: string },
): Promise<{ sha256: string; bytes: number } | undefined> {
  return storage.db
    .selectFrom("source_chunks")
    .select(["sha256", "bytes"])
    .where("tenant_id", "=", input.tenantId)
    .where("sha256", "=", input.sha256)
    .executeTakeFirst();
}
