import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Jobs accepted in [from, to) per tenant (jobs_by_accepted_at serves the range), retries
 * included: every accepted job is a submission the platform admitted.
 */
export async function countSubmissionsByTenant(
  target: StorageOrTransaction,
  input: { from: string; to: string },
): Promise<Map<string, number>> {
  const rows = await executorOf(target)
    .selectFrom("jobs")
    .select(["tenant_id", (eb) => eb.fn.countAll<number | string | bigint>().as("n")])
    .where("accepted_at", ">=", input.from)
    .where("accepted_at", "<", input.to)
    .groupBy("tenant_id")
    .execute();
  return new Map(rows.map((r) => [r.tenant_id, Number(r.n)]));
}
