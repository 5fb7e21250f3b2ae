import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodSpendRow, dogfoodDb, type Recorded } from "./dogfood-tables.js";

/** Stores a month's spend from one source unless that (month, source) is stored, and answers the stored one. */
export async function recordDogfoodSpend(
  target: StorageOrTransaction,
  row: DogfoodSpendRow,
): Promise<Recorded<DogfoodSpendRow>> {
  const db = dogfoodDb(target);
  const inserted = await db
    .insertInto("dogfood_spend")
    .values(row)
    .onConflict((c) => c.columns(["month", "source"]).doNothing())
    .executeTakeFirst();
  const stored = await db
    .selectFrom("dogfood_spend")
    .selectAll()
    .where("month", "=", row.month)
    .where("source", "=", row.source)
    .executeTakeFirstOrThrow();
  return { row: stored, inserted: (inserted.numInsertedOrUpdatedRows ?? 0n) > 0n };
}
