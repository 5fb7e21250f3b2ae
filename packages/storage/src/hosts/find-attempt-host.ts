import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * The host an attempt was placed on, or undefined when there is no such attempt. An attempt's
 * host never changes once it is placed, so a host's identity can be checked against it before
 * its fenced report is performed.
 */
export async function findAttemptHost(
  target: StorageOrTransaction,
  ref: { jobId: string; attempt: number },
): Promise<string | undefined> {
  const row = await executorOf(target)
    .selectFrom("attempts")
    .select("host_id")
    .where("job_id", "=", ref.jobId)
    .where("number", "=", ref.attempt)
    .executeTakeFirst();
  return row?.host_id;
}
