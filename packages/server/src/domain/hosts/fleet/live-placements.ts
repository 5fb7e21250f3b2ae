import type { HostSandboxReport, LivePlacementRecord } from "@kiln/storage";
import { LEASE_SECONDS } from "../attempt-lease.js";

/**
 * A host renews each attempt's lease every 2 seconds by default (start-machine-host.ts); ten
 * seconds without a renewal is five missed heartbeats, well before the 15-second lease lapses
 * and the lease reaper hands the attempt back to the queue.
 */
export const STALE_HEARTBEAT_SECONDS = 10;

/** The VM (sandbox) id of an attempt: the name its host gives the attempt's directory and cgroup. */
export function vmIdOf(jobId: string, attempt: number): string {
  return `${jobId}-a${attempt}`;
}

/** The attempt a VM id names, or null when it names none of this job's. */
export function attemptOfVmId(jobId: string, vmId: string): number | null {
  const match = /^(.*)-a([1-9][0-9]{0,8})$/.exec(vmId);
  if (match === null || match[1] !== jobId) return null;
  return Number(match[2]);
}

/** When the host last renewed a lease that now expires at `leaseExpiresAt`. */
export function lastRenewalOf(leaseExpiresAt: string): Date {
  return new Date(Date.parse(leaseExpiresAt) - LEASE_SECONDS * 1000);
}

/** Whether a lease expiring at `leaseExpiresAt` was last renewed more than STALE_HEARTBEAT_SECONDS before `now`. */
export function isStale(leaseExpiresAt: string, now: Date): boolean {
  return now.getTime() - lastRenewalOf(leaseExpiresAt).getTime() > STALE_HEARTBEAT_SECONDS * 1000;
}

export interface PlacementView {
  job_id: string;
  vm_id: string;
  host: string;
  tenant?: string;
  state: string;
  flagged: boolean;
  flag_reason: string | null;
  placed_at?: string;
  flags: string[];
  attempt: number | null;
  lease_expires_at: string | null;
  last_heartbeat_at: string | null;
  job_status?: string;
}

/**
 * The live placements as the operator reads them, flagged first (then oldest first): each
 * running attempt with its flags — `stale_heartbeat` (no lease renewal for
 * STALE_HEARTBEAT_SECONDS), `lease_expired` (the lease lapsed and the reaper has not yet handed
 * the attempt back) — and, as `orphaned` placements, every sandbox a host reported running for
 * an attempt that is not live on that host.
 */
export function livePlacementsView(
  input: { placements: readonly LivePlacementRecord[]; sandboxReports: readonly HostSandboxReport[] },
  now: Date,
): PlacementView[] {
  const views: PlacementView[] = [];
  const live = new Set<string>();
  for (const p of input.placements) {
    const vmId = vmIdOf(p.jobId, p.attempt);
    live.add(`${p.hostId}/${vmId}`);
    const lastRenewal = lastRenewalOf(p.leaseExpiresAt);
    const flags: string[] = [];
    const reasons: string[] = [];
    if (isStale(p.leaseExpiresAt, now)) {
      flags.push("stale_heartbeat");
      const seconds = Math.floor((now.getTime() - lastRenewal.getTime()) / 1000);
      reasons.push(`stale heartbeat: host ${p.hostId} last renewed the lease ${seconds}s ago`);
    }
    if (Date.parse(p.leaseExpiresAt) < now.getTime()) {
      flags.push("lease_expired");
      reasons.push(`lease expired at ${p.leaseExpiresAt}; the lease reaper hands the attempt back`);
    }
    views.push({
      job_id: p.jobId,
      vm_id: vmId,
      host: p.hostId,
      tenant: p.tenantId,
      state: "running",
      flagged: flags.length > 0,
      flag_reason: reasons.length > 0 ? reasons.join("; ") : null,
      placed_at: p.startedAt,
      flags,
      attempt: p.attempt,
      lease_expires_at: p.leaseExpiresAt,
      last_heartbeat_at: lastRenewal.toISOString(),
      job_status: p.jobStatus,
    });
  }
  for (const report of input.sandboxReports) {
    for (const vmId of report.attemptIds) {
      if (live.has(`${report.hostId}/${vmId}`)) continue;
      const match = /^(.*)-a([1-9][0-9]*)$/.exec(vmId);
      views.push({
        job_id: match?.[1] ?? vmId,
        vm_id: vmId,
        host: report.hostId,
        state: "orphaned",
        flagged: true,
        flag_reason: `orphaned sandbox: host ${report.hostId} reported it at ${report.reportedAt} but runs no live attempt ${vmId}`,
        flags: ["orphaned"],
        attempt: match?.[2] === undefined ? null : Number(match[2]),
        lease_expires_at: null,
        last_heartbeat_at: null,
      });
    }
  }
  return views.sort((a, b) =>
    a.flagged !== b.flagged ? (a.flagged ? -1 : 1) : (a.placed_at ?? "").localeCompare(b.placed_at ?? ""),
  );
}
