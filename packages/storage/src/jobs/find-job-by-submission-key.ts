import { executorOf, type StorageOrTransaction } from "../executor.js";

/** The tenant's job submitted under an idempotency key, with the hash of the request that made it. */
export async function findJobBySubmissionKey(
  target: StorageOrTransaction,
  input: { tenantId: string; key: string },
): Promise<{ id: string; request_hash: string } | undefined> {
  return executorOf(target)
    .selectFrom("jobs")
    .select(["id", "request_hash"])
    .where("tenant_id", "=", input.tenantId)
    .where("submission_key", "=", input.key)
    .executeTakeFirst();
}
