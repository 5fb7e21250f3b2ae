import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodSpendRow, dogfoodDb } from "./dogfood-tables.js";

/** Every recorded spend line, by month then source. */
export async function listDogfoodSpend(target: StorageOrTransaction): Promise<DogfoodSpendRow[]> {
  return dogfoodDb(target).selectFrom("dogfood_spend").selectAll().orderBy("month").orderBy("source").execute();
}
