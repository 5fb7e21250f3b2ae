import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodIncidentRow, dogfoodDb } from "./dogfood-tables.js";

/**
 * Records the issue filed for an incident once: the UPDATE applies only while the incident has
 * no issue, so of two racing recordings one applies and the other reads the applied one. Answers
 * the incident afterwards (undefined when there is no such incident) and whether this call applied.
 */
export async function recordDogfoodIncidentIssue(
  target: StorageOrTransaction,
  input: { incident: string; number: number; filedAt: string; recordedBy: string; recordedAt: string },
): Promise<{ row: DogfoodIncidentRow; applied: boolean } | undefined> {
  const db = dogfoodDb(target);
  const applied = await db
    .updateTable("dogfood_incidents")
    .set({
      issue_number: input.number,
      issue_filed_at: input.filedAt,
      issue_recorded_by: input.recordedBy,
      issue_recorded_at: input.recordedAt,
    })
    .where("id", "=", input.incident)
    .where("issue_number", "is", null)
    .executeTakeFirst();
  const row = await db.selectFrom("dogfood_incidents").selectAll().where("id", "=", input.incident).executeTakeFirst();
  return row === undefined ? undefined : { row, applied: applied.numUpdatedRows > 0n };
}
