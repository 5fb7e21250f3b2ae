import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodIncidentRow, dogfoodDb } from "./dogfood-tables.js";

/** Every incident, by occurrence then id. */
export async function listDogfoodIncidents(target: StorageOrTransaction): Promise<DogfoodIncidentRow[]> {
  return dogfoodDb(target).selectFrom("dogfood_incidents").selectAll().orderBy("occurred_at").orderBy("id").execute();
}
