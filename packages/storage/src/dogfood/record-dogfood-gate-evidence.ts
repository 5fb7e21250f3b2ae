import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodGateEvidenceRow, dogfoodDb, type Recorded } from "./dogfood-tables.js";

/**
 * Stores gate evidence for (part, reference) unless some is stored already, and answers the
 * stored row: the insert does nothing on the primary key, so two racing recordings keep the
 * first and both read it back (the caller compares contents to tell a replay from a conflict).
 */
export async function recordDogfoodGateEvidence(
  target: StorageOrTransaction,
  row: DogfoodGateEvidenceRow,
): Promise<Recorded<DogfoodGateEvidenceRow>> {
  const db = dogfoodDb(target);
  const inserted = await db
    .insertInto("dogfood_gate_evidence")
    .values(row)
    .onConflict((c) => c.columns(["part", "reference"]).doNothing())
    .executeTakeFirst();
  const stored = await db
    .selectFrom("dogfood_gate_evidence")
    .selectAll()
    .where("part", "=", row.part)
    .where("reference", "=", row.reference)
    .executeTakeFirstOrThrow();
  return { row: stored, inserted: (inserted.numInsertedOrUpdatedRows ?? 0n) > 0n };
}
