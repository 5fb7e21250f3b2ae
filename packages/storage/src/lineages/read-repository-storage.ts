import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type LineageRow, liveLineagesOf } from "./lineage-row.js";

/** One onboarded repository's live lineages and their bytes; undefined when not onboarded for the tenant. */
export async function readRepositoryStorage(
  target: StorageOrTransaction,
  input: { tenantId: string; repository: string },
): Promise<{ lineages: readonly LineageRow[]; totalBytes: number } | undefined> {
  const db = executorOf(target);
  const onboarded = await db
    .selectFrom("repositories")
    .select("name")
    .where("tenant_id", "=", input.tenantId)
    .where("name", "=", input.repository)
    .executeTakeFirst();
  if (onboarded === undefined) return undefined;
  const lineages = await liveLineagesOf(db, input.tenantId, [input.repository]);
  return { lineages, totalBytes: lineages.reduce((sum, l) => sum + l.bytes, 0) };
}
