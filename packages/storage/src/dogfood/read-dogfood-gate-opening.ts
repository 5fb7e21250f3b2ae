import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodGateOpeningRow, dogfoodDb } from "./dogfood-tables.js";

/** When the entry gate opened, or undefined while it is closed. */
export async function readDogfoodGateOpening(target: StorageOrTransaction): Promise<DogfoodGateOpeningRow | undefined> {
  return dogfoodDb(target).selectFrom("dogfood_gate_openings").selectAll().executeTakeFirst();
}
