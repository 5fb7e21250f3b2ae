import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodInterventionRow, dogfoodDb, type Recorded } from "./dogfood-tables.js";

/** Stores an intervention unless one of that id is stored, and answers the stored one. */
export async function recordDogfoodIntervention(
  target: StorageOrTransaction,
  row: DogfoodInterventionRow,
): Promise<Recorded<DogfoodInterventionRow>> {
  const db = dogfoodDb(target);
  const inserted = await db
    .insertInto("dogfood_interventions")
    .values(row)
    .onConflict((c) => c.column("id").doNothing())
    .executeTakeFirst();
  const stored = await db
    .selectFrom("dogfood_interventions")
    .selectAll()
    .where("id", "=", row.id)
    .executeTakeFirstOrThrow();
  return { row: stored, inserted: (inserted.numInsertedOrUpdatedRows ?? 0n) > 0n };
}
