import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";

/** Source bytes one upload (or one job's inline source) sent on one UTC day. */
export interface UploadedBytesRow {
  /** `YYYY-MM-DD`. */
  readonly date: string;
  /** The upload's key, or for an inline source the job it was submitted with. */
  readonly upload: string;
  /** `archive` (a streamed upload's parts) or `inline` (a schema_version 1 job's files). */
  readonly kind: "archive" | "inline";
  readonly repository: string;
  /** Who reserved the upload, or submitted the inline job. */
  readonly reserved_by: string;
  readonly bytes: number;
}

/**
 * A page of a tenant's uploaded source bytes received in [from, to) and by `receivedBy`:
 * uploaded (not reused) part bytes per upload and UTC day, and each inline source's bytes on the
 * day its job was accepted, ordered by day, then upload (or job), then kind — the same bytes
 * the tenant's bandwidth consumption counts (sumUploadedBytes). The kind completes the order:
 * an upload key is the client's choice and could equal a job id.
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
        .select([
          day.as("date"),
          "p.upload as upload",
          sql<"archive" | "inline">`'archive'`.as("kind"),
          "u.repository as repository",
          "u.reserved_by as reserved_by",
        ])
        .select((s) => s.fn.sum<number | string>("p.bytes").as("bytes"))
        .where("p.tenant_id", "=", input.tenantId)
        .where("p.origin", "=", "uploaded")
        .where("p.received_at", ">=", input.from)
        .where("p.received_at", "<", input.to)
        .where("p.received_at", "<=", input.receivedBy)
        .groupBy([day, "p.upload", "u.repository", "u.reserved_by"])
        .unionAll(
          eb
            .selectFrom("inline_source_bytes as i")
            .select([
              sql<string>`substr(i.received_at, 1, 10)`.as("date"),
              "i.job_id as upload",
              sql<"archive" | "inline">`'inline'`.as("kind"),
              "i.repository as repository",
              "i.submitted_by as reserved_by",
              "i.bytes as bytes",
            ])
            .where("i.tenant_id", "=", input.tenantId)
            .where("i.received_at", ">=", input.from)
            .where("i.received_at", "<", input.to)
            .where("i.received_at", "<=", input.receivedBy),
        )
        .as("g"),
    )
    .selectAll();
  const page = await fetchKeysetPage(query, {
    sort: [
      ["date", "asc", "text"],
      ["upload", "asc", "text"],
      ["kind", "asc", "text"],
    ],
    limit: input.limit,
    cursor: input.cursor ?? null,
  });
  // PostgreSQL's sum of a bigint is numeric, which pg returns as text.
  return { ...page, rows: page.rows.map((r) => ({ ...r, bytes: Number(r.bytes) })) };
}
