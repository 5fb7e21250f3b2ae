import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";

/** Source part bytes one upload sent on one UTC day. */
export interface UploadedBytesRow {
  /** `YYYY-MM-DD`. */
  readonly date: string;
  readonly upload: string;
  readonly repository: string;
  readonly reserved_by: string;
  readonly bytes: number;
}

/**
 * A page of a tenant's uploaded (not reused) source part bytes received in [from, to) and by
 * `receivedBy`, per upload and UTC day, ordered by day then upload — the same parts the tenant's
 * bandwidth consumption counts (readTenantConsumption).
 */
export async function listUploadedBytes(
  target: StorageOrTransaction,
  input: { tenantId: string; from: string; to: string; receivedBy: string; limit: number; cursor?: string | null },
): Promise<KeysetPage<UploadedBytesRow>> {
  const db = executorOf(target);
  const day = sql<string>`substr(p.received_at, 1, 10)`;
  const query = db
    .selectFrom((eb) =>
      eb
        .selectFrom("source_upload_parts as p")
        .innerJoin("source_uploads as u", (join) =>
          join.onRef("u.tenant_id", "=", "p.tenant_id").onRef("u.upload", "=", "p.upload"),
        )
        .select([day.as("date"), "p.upload as upload", "u.repository as repository", "u.reserved_by as reserved_by"])
        .select((s) => s.fn.sum<number | string>("p.bytes").as("bytes"))
        .where("p.tenant_id", "=", input.tenantId)
        .where("p.origin", "=", "uploaded")
        .where("p.received_at", ">=", input.from)
        .where("p.received_at", "<", input.to)
        .where("p.received_at", "<=", input.receivedBy)
        .groupBy([day, "p.upload", "u.repository", "u.reserved_by"])
        .as("g"),
    )
    .selectAll();
  const page = await fetchKeysetPage(query, {
    sort: [
      ["date", "asc", "text"],
      ["upload", "asc", "text"],
    ],
    limit: input.limit,
    cursor: input.cursor ?? null,
  });
  // PostgreSQL's sum of a bigint is numeric, which pg returns as text.
  return { ...page, rows: page.rows.map((r) => ({ ...r, bytes: Number(r.bytes) })) };
}
