import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodMaintenanceRow, dogfoodDb } from "./dogfood-tables.js";

/** Every declared maintenance interval, by start. */
export async function listDogfoodMaintenance(target: StorageOrTransaction): Promise<DogfoodMaintenanceRow[]> {
  return dogfoodDb(target).selectFrom("dogfood_maintenance").selectAll().orderBy("starts_at").orderBy("id").execute();
}
