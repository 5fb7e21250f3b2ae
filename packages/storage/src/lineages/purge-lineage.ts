import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import type { LineageRow } from "./lineage-row.js";

/**
 * Marks one of the repository's lineages purged: it no longer counts against the quota, and
 * the next placement of its class tells the host to drop it (the next job starts cold).
 * Purging a purged or evicted lineage marks it purged again. One conditional UPDATE; it joins
 * the caller's transaction (the keyed mutation's receipt commits with it).
 */
export async function purgeLineage(
  target: StorageOrTransaction,
  input: { tenantId: string; repository: string; lineage: string; now: Date },
): Promise<{ kind: "purged"; row: LineageRow } | { kind: "not_found" }> {
  const row = await executorOf(target)
    .updateTable("lineages")
    .set({ state: "purged", state_changed_at: formatTimestamp(input.now) })
    .where("tenant_id", "=", input.tenantId)
    .where("repository", "=", input.repository)
    .where("lineage", "=", input.lineage)
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? { kind: "not_found" } : { kind: "purged", row };
}
