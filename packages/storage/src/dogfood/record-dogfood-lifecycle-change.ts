import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodLifecycleChangeRow, dogfoodDb, type Recorded } from "./dogfood-tables.js";

/**
 * Stores a lifecycle change unless one of that (kind, identity) is stored — a new generation,
 * release digest or identity happens once — and answers the stored one.
 */
export async function recordDogfoodLifecycleChange(
  target: StorageOrTransaction,
  row: DogfoodLifecycleChangeRow,
): Promise<Recorded<DogfoodLifecycleChangeRow>> {
  const db = dogfoodDb(target);
  const inserted = await db
    .insertInto("dogfood_lifecycle_changes")
    .values(row)
    .onConflict((c) => c.columns(["kind", "identity"]).doNothing())
    .executeTakeFirst();
  const stored = await db
    .selectFrom("dogfood_lifecycle_changes")
    .selectAll()
    .where("kind", "=", row.kind)
    .where("identity", "=", row.identity)
    .executeTakeFirstOrThrow();
  return { row: stored, inserted: (inserted.numInsertedOrUpdatedRows ?? 0n) > 0n };
}
