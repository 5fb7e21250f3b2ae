import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * The job of a running attempt whose lease token still matches, or undefined: what a host may
 * read on an attempt's behalf (e.g. its tenant's registry credentials) only while it holds it.
 */
export async function findLeasedAttempt(
  target: StorageOrTransaction,
  ref: { jobId: string; attempt: number; leaseToken: string },
): Promise<{ tenantId: string; repository: string; hostId: string } | undefined> {
  const row = await executorOf(target)
    .selectFrom("attempts")
    .innerJoin("jobs", "jobs.id", "attempts.job_id")
    .select(["jobs.tenant_id", "jobs.repository", "attempts.host_id"])
    .where("attempts.job_id", "=", ref.jobId)
    .where("attempts.number", "=", ref.attempt)
    .where("attempts.lease_token", "=", ref.leaseToken)
    .where("attempts.state", "=", "running")
    .executeTakeFirst();
  return row === undefined ? undefined : { tenantId: row.tenant_id, repository: row.repository, hostId: row.host_id };
}
