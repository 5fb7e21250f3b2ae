import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodGateEvidenceRow, dogfoodDb } from "./dogfood-tables.js";

/** Every recorded gate evidence row, oldest recording first. */
export async function listDogfoodGateEvidence(target: StorageOrTransaction): Promise<DogfoodGateEvidenceRow[]> {
  return dogfoodDb(target)
    .selectFrom("dogfood_gate_evidence")
    .selectAll()
    .orderBy("recorded_at")
    .orderBy("part")
    .orderBy("reference")
    .execute();
}
