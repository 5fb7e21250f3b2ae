import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodMaintenanceRow, dogfoodDb, type Recorded } from "./dogfood-tables.js";

/** Stores a maintenance declaration unless one of that id is stored, and answers the stored one. */
export async function declareDogfoodMaintenance(
  target: StorageOrTransaction,
  row: DogfoodMaintenanceRow,
): Promise<Recorded<DogfoodMaintenanceRow>> {
  const db = dogfoodDb(target);
  const inserted = await db
    .insertInto("dogfood_maintenance")
    .values(row)
    .onConflict((c) => c.column("id").doNothing())
    .executeTakeFirst();
  const stored = await db
    .selectFrom("dogfood_maintenance")
    .selectAll()
    .where("id", "=", row.id)
    .executeTakeFirstOrThrow();
  return { row: stored, inserted: (inserted.numInsertedOrUpdatedRows ?? 0n) > 0n };
}
