import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodIncidentRow, dogfoodDb } from "./dogfood-tables.js";

/**
 * Resolves an incident once: the UPDATE applies only while it is unresolved, so of two racing
 * resolutions one applies and the other reads it. Answers the incident afterwards (undefined
 * when there is none) and whether this call applied.
 */
export async function resolveDogfoodIncident(
  target: StorageOrTransaction,
  input: { incident: string; detail: string; resolvedBy: string; resolvedAt: string },
): Promise<{ row: DogfoodIncidentRow; applied: boolean } | undefined> {
  const db = dogfoodDb(target);
  const applied = await db
    .updateTable("dogfood_incidents")
    .set({ resolution_detail: input.detail, resolved_by: input.resolvedBy, resolved_at: input.resolvedAt })
    .where("id", "=", input.incident)
    .where("resolved_at", "is", null)
    .executeTakeFirst();
  const row = await db.selectFrom("dogfood_incidents").selectAll().where("id", "=", input.incident).executeTakeFirst();
  return row === undefined ? undefined : { row, applied: applied.numUpdatedRows > 0n };
}
