import { executorOf, type StorageOrTransaction } from "../executor.js";

/** The repository when it is onboarded for the tenant, else undefined (another tenant's is never found). */
export async function findOnboardedRepository(
  target: StorageOrTransaction,
  input: { tenantId: string; repository: string },
): Promise<{ name: string } | undefined> {
  return executorOf(target)
    .selectFrom("repositories")
    .select("name")
    .where("tenant_id", "=", input.tenantId)
    .where("name", "=", input.repository)
    .executeTakeFirst();
}
