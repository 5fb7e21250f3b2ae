import { type Selectable, sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { SourceUploadPartsTable, SourceUploadsTable } from "../schema.js";

export type SourceUploadRow = Selectable<SourceUploadsTable>;
export type SourceUploadPartRow = Selectable<SourceUploadPartsTable>;

/** An upload row without its manifest: what every view of an upload and every per-part request needs. */
export type SourceUploadHeader = Omit<SourceUploadRow, "manifest" | "manifest_deflated">;

/** The columns of a SourceUploadHeader. */
export const SOURCE_UPLOAD_HEADER_COLUMNS = [
  "tenant_id",
  "upload",
  "repository",
  "reserved_by",
  "request_hash",
  "format_version",
  "manifest_sha256",
  "totals",
  "part_count",
  "part_bytes",
  "state",
  "reserved_at",
  "expires_at",
  "verified_at",
  "completed_by",
  "rejection",
  "claimed_job",
  "claimed_at",
  "cleaned_at",
] as const satisfies readonly (keyof SourceUploadHeader)[];

/**
 * The uploads that count toward a tenant's reservations: unclaimed ones, expired included,
 * until cleanup has released them (spec, Limits: "expired bytes still count toward the tenant
 * reservations until cleanup completes").
 */
export async function tenantReservations(
  target: StorageOrTransaction,
  tenantId: string,
): Promise<{ reservedBytes: number; unclaimedUploads: number }> {
  const row = await executorOf(target)
    .selectFrom("source_uploads")
    .select([
      sql<number>`cast(coalesce(sum(part_bytes), 0) as bigint)`.as("reserved_bytes"),
      sql<number>`cast(count(*) as bigint)`.as("unclaimed"),
    ])
    .where("tenant_id", "=", tenantId)
    .where("claimed_job", "is", null)
    .where("cleaned_at", "is", null)
    .executeTakeFirstOrThrow();
  return { reservedBytes: Number(row.reserved_bytes), unclaimedUploads: Number(row.unclaimed) };
}
