import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodIncidentRow, dogfoodDb } from "./dogfood-tables.js";

/** One incident by id, or undefined. */
export async function readDogfoodIncident(
  target: StorageOrTransaction,
  id: string,
): Promise<DogfoodIncidentRow | undefined> {
  return dogfoodDb(target).selectFrom("dogfood_incidents").selectAll().where("id", "=", id).executeTakeFirst();
}
