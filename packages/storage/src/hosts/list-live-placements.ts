import { executorOf, type StorageOrTransaction } from "../executor.js";

/** A running attempt as operator.placements.list reads it. */
export interface LivePlacementRecord {
  jobId: string;
  attempt: number;
  hostId: string;
  tenantId: string;
  jobStatus: string;
  vcpus: number;
  startedAt: string;
  leaseExpiresAt: string;
}

/** What a host last said it runs sandboxes for (its fleet poll). */
export interface HostSandboxReport {
  hostId: string;
  attemptIds: string[];
  reportedAt: string;
}

/**
 * Every live placement (a `running` attempt: leased and not yet finished or lost) with its job's
 * tenant and status, and every host's last sandbox report, which the caller compares with them
 * to find orphaned sandboxes. Plain reads; nothing is locked.
 */
export async function listLivePlacements(
  target: StorageOrTransaction,
): Promise<{ placements: LivePlacementRecord[]; sandboxReports: HostSandboxReport[] }> {
  const db = executorOf(target);
  const rows = await db
    .selectFrom("attempts")
    .innerJoin("jobs", "jobs.id", "attempts.job_id")
    .select([
      "attempts.job_id",
      "attempts.number",
      "attempts.host_id",
      "attempts.vcpus",
      "attempts.started_at",
      "attempts.lease_expires_at",
      "jobs.tenant_id",
      "jobs.status",
    ])
    .where("attempts.state", "=", "running")
    .orderBy("attempts.started_at")
    .orderBy("attempts.job_id")
    .execute();
  const hosts = await db
    .selectFrom("hosts")
    .select(["id", "reported_attempts", "reported_at"])
    .where("reported_at", "is not", null)
    .orderBy("id")
    .execute();
  return {
    placements: rows.map((r) => ({
      jobId: r.job_id,
      attempt: Number(r.number),
      hostId: r.host_id,
      tenantId: r.tenant_id,
      jobStatus: r.status,
      vcpus: Number(r.vcpus),
      startedAt: r.started_at,
      leaseExpiresAt: r.lease_expires_at,
    })),
    sandboxReports: hosts.flatMap((h) =>
      h.reported_at === null
        ? []
        : [
            {
              hostId: h.id,
              attemptIds: JSON.parse(h.reported_attempts ?? "[]") as string[],
              reportedAt: h.reported_at,
            },
          ],
    ),
  };
}
