import { executorOf, type StorageOrTransaction } from "../executor.js";

export interface LineageDrop {
  readonly lineage: string;
  readonly reason: "purged" | "evicted";
  /** The host drops its state of the lineage if that state descends from this generation or an earlier one. */
  readonly throughGeneration: number;
}

/**
 * What a placement must tell the host about the job's lineage: nothing when it is live or
 * unknown, else that it was purged or evicted through a generation. One read, no lock: a
 * purge committed after it reaches the next placement (the save rule in record-lineage-save.ts
 * keeps a state descending from the dropped one from coming back live meanwhile).
 */
export async function findLineageDrop(
  target: StorageOrTransaction,
  input: { tenantId: string; repository: string; class: string },
): Promise<LineageDrop | undefined> {
  const row = await executorOf(target)
    .selectFrom("lineages")
    .select(["lineage", "state", "generation"])
    .where("tenant_id", "=", input.tenantId)
    .where("repository", "=", input.repository)
    .where("class", "=", input.class)
    .executeTakeFirst();
  if (row === undefined || row.state === "live") return undefined;
  return { lineage: row.lineage, reason: row.state, throughGeneration: row.generation };
}
