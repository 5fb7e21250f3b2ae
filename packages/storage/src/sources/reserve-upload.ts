import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";
import { attachHeldChunks } from "./attach-held-chunks.js";
import { SOURCE_UPLOAD_HEADER_COLUMNS, type SourceUploadHeader, tenantReservations } from "./upload-row.js";

export interface UploadReservation {
  readonly tenantId: string;
  readonly upload: string;
  readonly repository: string;
  readonly reservedBy: string;
  readonly requestHash: string;
  readonly formatVersion: number;
  /**
   * The manifest {entries, parts}: its JSON compressed by the server
   * (server/src/domain/sources/manifest-codec.ts), stored as given.
   */
  readonly manifestDeflated: Uint8Array;
  readonly manifestSha256: string;
  /** JSON text of the totals. */
  readonly totals: string;
  readonly partCount: number;
  readonly partBytes: number;
  readonly now: Date;
  readonly expiresAt: Date;
  /** The tenant's reservation limits. */
  readonly maxBytes: number;
  readonly maxUnclaimedUploads: number;
  /**
   * The manifest's parts: a new reservation attaches, in its own transaction, every one the
   * tenant already holds (attach-held-chunks.ts), so it commits once rather than twice.
   */
  readonly attachHeld?: readonly { part: number; sha256: string; bytes: number }[];
}

export type ReserveUploadResult =
  | { readonly kind: "created"; readonly upload: SourceUploadHeader }
  /** The key already names an upload: the caller compares request_hash and expiry. */
  | { readonly kind: "existing"; readonly upload: SourceUploadHeader }
  | {
      readonly kind: "over_limit";
      readonly limit: "bytes" | "uploads";
      readonly reservedBytes: number;
      readonly unclaimedUploads: number;
    };

/**
 * Reserves an upload under the tenant's limits (part bytes and unclaimed uploads, expired ones
 * counting until cleanup), or finds the upload the key already names.
 *
 * Locking: the limit check reads the tenant's uploads and then inserts, so two reservations
 * racing could both fit under the limit alone and pass it together. On SQLite the transaction
 * holds the database-wide write lock from its start (BEGIN IMMEDIATE); on PostgreSQL the
 * tenant's row is locked FOR UPDATE first, so one tenant's reservations are checked one after
 * the other. The primary key (tenant, upload) settles two reservations of one key. Held parts
 * are attached inside the same transaction: the reservation and what it already holds commit
 * together (one commit, one fsync, on the path of every upload, including an unchanged re-run).
 */
export async function reserveUpload(storage: Storage, input: UploadReservation): Promise<ReserveUploadResult> {
  return storage.transaction(async (trx) => {
    if (storage.capabilities.rowLocks) {
      await trx.selectFrom("tenants").select("id").where("id", "=", input.tenantId).forUpdate().executeTakeFirst();
    }
    // The header, not the manifest: a megabyte of compressed bytes the answer does not show.
    const existing = await trx
      .selectFrom("source_uploads")
      .select(SOURCE_UPLOAD_HEADER_COLUMNS)
      .where("tenant_id", "=", input.tenantId)
      .where("upload", "=", input.upload)
      .executeTakeFirst();
    if (existing !== undefined) return { kind: "existing", upload: existing };
    const current = await tenantReservations(trx, input.tenantId);
    if (current.unclaimedUploads + 1 > input.maxUnclaimedUploads) {
      return { kind: "over_limit", limit: "uploads", ...current };
    }
    if (current.reservedBytes + input.partBytes > input.maxBytes) {
      return { kind: "over_limit", limit: "bytes", ...current };
    }
    const upload = await trx
      .insertInto("source_uploads")
      .values({
        tenant_id: input.tenantId,
        upload: input.upload,
        repository: input.repository,
        reserved_by: input.reservedBy,
        request_hash: input.requestHash,
        format_version: input.formatVersion,
        manifest: "",
        manifest_deflated: input.manifestDeflated,
        manifest_sha256: input.manifestSha256,
        totals: input.totals,
        part_count: input.partCount,
        part_bytes: input.partBytes,
        state: "reserved",
        reserved_at: formatTimestamp(input.now),
        expires_at: formatTimestamp(input.expiresAt),
        verified_at: null,
        completed_by: null,
        rejection: null,
        claimed_job: null,
        claimed_at: null,
        cleaned_at: null,
      })
      .returning(SOURCE_UPLOAD_HEADER_COLUMNS)
      .executeTakeFirstOrThrow();
    if (input.attachHeld !== undefined && input.attachHeld.length > 0)
      await attachHeldChunks(trx, {
        tenantId: input.tenantId,
        upload: input.upload,
        parts: input.attachHeld,
        now: input.now,
      });
    return { kind: "created", upload };
  });
}
