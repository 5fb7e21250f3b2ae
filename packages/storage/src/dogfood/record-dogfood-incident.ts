import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodIncidentRow, dogfoodDb, type Recorded } from "./dogfood-tables.js";

/**
 * Stores an incident unless one of that id is stored, and answers the stored one. The insert
 * does nothing on the primary key, so the platform's audit recording the same finding from two
 * processes records it exactly once.
 */
export async function recordDogfoodIncident(
  target: StorageOrTransaction,
  row: Omit<
    DogfoodIncidentRow,
    | "issue_number"
    | "issue_filed_at"
    | "issue_recorded_by"
    | "issue_recorded_at"
    | "resolution_detail"
    | "resolved_by"
    | "resolved_at"
  >,
): Promise<Recorded<DogfoodIncidentRow>> {
  const db = dogfoodDb(target);
  const inserted = await db
    .insertInto("dogfood_incidents")
    .values(row)
    .onConflict((c) => c.column("id").doNothing())
    .executeTakeFirst();
  const stored = await db
    .selectFrom("dogfood_incidents")
    .selectAll()
    .where("id", "=", row.id)
    .executeTakeFirstOrThrow();
  return { row: stored, inserted: (inserted.numInsertedOrUpdatedRows ?? 0n) > 0n };
}
