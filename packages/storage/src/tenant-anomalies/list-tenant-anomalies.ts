import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type TenantAnomalyRecord, tenantAnomalyRecordOf } from "./tenant-anomaly-record.js";

/** At most `limit` flags: undisposed first, then newest first (by raising, then id). */
export async function listTenantAnomalies(
  target: StorageOrTransaction,
  input: { limit: number },
): Promise<TenantAnomalyRecord[]> {
  const rows = await executorOf(target)
    .selectFrom("tenant_anomalies")
    .selectAll()
    .orderBy(sql`case when disposition is null then 0 else 1 end`)
    .orderBy("raised_at", "desc")
    .orderBy("id", "desc")
    .limit(input.limit)
    .execute();
  return rows.map(tenantAnomalyRecordOf);
}
