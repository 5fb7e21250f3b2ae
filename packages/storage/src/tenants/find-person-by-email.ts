import { executorOf, type StorageOrTransaction } from "../executor.js";
import { normalizeEmail, type Person, personFromRow } from "./tenant.js";

export async function findPersonByEmail(target: StorageOrTransaction, email: string): Promise<Person | undefined> {
  const row = await executorOf(target)
    .selectFrom("persons")
    .selectAll()
    .where("email", "=", normalizeEmail(email))
    .executeTakeFirst();
  return row === undefined ? undefined : personFromRow(row);
}
