import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodInterventionRow, dogfoodDb } from "./dogfood-tables.js";

/** Every recorded intervention, by when it was done. */
export async function listDogfoodInterventions(target: StorageOrTransaction): Promise<DogfoodInterventionRow[]> {
  return dogfoodDb(target).selectFrom("dogfood_interventions").selectAll().orderBy("at").orderBy("id").execute();
}
