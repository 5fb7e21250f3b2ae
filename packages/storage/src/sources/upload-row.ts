import { type Selectable, sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { SourceUploadPartsTable, SourceUploadsTable } from "../schema.js";

export type SourceUploadRow = Selectable<SourceUploadsTable>;
export type SourceUploadPartRow = Selectable<SourceUploadPartsTable>;

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
