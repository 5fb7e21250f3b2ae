import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";

/** Lineage byte-hours of one repository on one UTC day. */
export interface StorageByteHoursRow {
  /** `YYYY-MM-DD`. */
  readonly date: string;
  readonly repository: string;
  readonly byte_hours: number;
}

/**
 * A page of a tenant's lineage byte-hours per UTC day and repository: the sum of the hourly
 * samples (each one hour held) whose hour is in [fromHour, toHour) and before `beforeHour` (only
 * completed hours, so what a pinned instant saw does not grow while it is paged). Hours are
 * `YYYY-MM-DDTHH`. Ordered by day then repository.
 */
export async function listStorageByteHours(
  target: StorageOrTransaction,
  input: {
    tenantId: string;
    fromHour: string;
    toHour: string;
    beforeHour: string;
    limit: number;
    cursor?: string | null;
  },
): Promise<KeysetPage<StorageByteHoursRow>> {
  const day = sql<string>`substr(hour, 1, 10)`;
  const query = executorOf(target)
    .selectFrom((eb) =>
      eb
        .selectFrom("lineage_storage_samples")
        .select([day.as("date"), "repository"])
        .select((s) => s.fn.sum<number | string>("bytes").as("byte_hours"))
        .where("tenant_id", "=", input.tenantId)
        .where("hour", ">=", input.fromHour)
        .where("hour", "<", input.toHour)
        .where("hour", "<", input.beforeHour)
        .groupBy([day, "repository"])
        .as("s"),
    )
    .selectAll();
  const page = await fetchKeysetPage(query, {
    sort: [
      ["date", "asc", "text"],
      ["repository", "asc", "text"],
    ],
    limit: input.limit,
    cursor: input.cursor ?? null,
  });
  // PostgreSQL's sum of a bigint is numeric, which pg returns as text.
  return { ...page, rows: page.rows.map((r) => ({ ...r, byte_hours: Number(r.byte_hours) })) };
}
