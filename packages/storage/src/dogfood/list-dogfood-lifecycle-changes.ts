import type { StorageOrTransaction } from "../executor.js";
import { type DogfoodLifecycleChangeRow, dogfoodDb } from "./dogfood-tables.js";

/** Every recorded lifecycle change, by when it happened. */
export async function listDogfoodLifecycleChanges(target: StorageOrTransaction): Promise<DogfoodLifecycleChangeRow[]> {
  return dogfoodDb(target)
    .selectFrom("dogfood_lifecycle_changes")
    .selectAll()
    .orderBy("at")
    .orderBy("kind")
    .orderBy("identity")
    .execute();
}
