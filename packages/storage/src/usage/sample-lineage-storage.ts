import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Records, for the UTC hour of `now`, the bytes every tenant's live lineages hold per repository
 * (one row per tenant, repository and hour, from one grouped read of `lineages`). A sample that
 * already exists for the hour is kept (`ON CONFLICT DO NOTHING` on the primary key), so two
 * server processes sampling the same hour write it once and no lock is needed. Returns the
 * number of samples written.
 */
export async function sampleLineageStorage(target: StorageOrTransaction, input: { now: Date }): Promise<number> {
  const hour = input.now.toISOString().slice(0, 13);
  const result = await executorOf(target)
    .insertInto("lineage_storage_samples")
    .columns(["tenant_id", "repository", "hour", "bytes"])
    .expression((eb) =>
      eb
        .selectFrom("lineages")
        .select((s) => ["tenant_id", "repository", s.val(hour).as("hour"), s.fn.sum<number>("bytes").as("bytes")])
        .where("state", "=", "live")
        .groupBy(["tenant_id", "repository"]),
    )
    .onConflict((c) => c.columns(["tenant_id", "hour", "repository"]).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0);
}
