import { executorOf, inTransaction, type StorageOrTransaction } from "../executor.js";
import { JOB_CHANNELS, notifyAtCommit, tenantPlacementSubject } from "../notifications/job-notices.js";
import { formatTimestamp } from "../timestamps.js";
import { compareAndSetTenantRow } from "./compare-and-set-tenant-row.js";
import { readTenantControls, type StoredRateCard } from "./read-tenant-controls.js";
import type { VersionedWriteResult } from "./write-tenant-settings.js";

export interface TenantControlsChanges {
  readonly maxRunningJobs?: number;
  readonly storageQuotaBytes?: number;
  readonly bandwidthBytesPerMonth?: number;
  /** null removes the rate card. */
  readonly rateCard?: StoredRateCard | null;
  readonly suspension?: { readonly suspended: boolean; readonly reason: string | null };
  /** A credit to the tenant's usage, recorded with the version it moved (see writeTenantControls). */
  readonly credit?: UsageCredit;
}

/** An operator's credit: positive vCPU-seconds and cents taken off the tenant's usage. */
export interface UsageCredit {
  readonly id: string;
  readonly vcpuSeconds: number;
  readonly amountCents: number;
  readonly job: string | null;
  readonly reason: string;
}

/**
 * A compare-and-set write of a tenant's controls (operator.tenants.controls.set), like
 * writeTenantSettings: only while `expectedVersion` is current, moving it by one. A suspension
 * keeps the instant it began across later changes; lifting it clears reason and instant.
 * Changes reach the next admission (suspension) and the next placement (concurrency, which
 * claim-next-job reads in its own transaction) and the next lineage save (storage quota).
 */
export async function writeTenantControls(
  target: StorageOrTransaction,
  input: {
    tenantId: string;
    expectedVersion: number;
    changes: TenantControlsChanges;
    changedBy: string;
    now: Date;
  },
): Promise<VersionedWriteResult> {
  return inTransaction(target, async (tx) => {
    const current = await readTenantControls(tx, input);
    if (current === undefined) return { kind: "not_found" };
    if (current.version !== input.expectedVersion) return { kind: "stale", currentVersion: current.version };
    const c = input.changes;
    const changedAt = formatTimestamp(input.now);
    const rateCard = c.rateCard === undefined ? current.rateCard : c.rateCard;
    const suspended = c.suspension?.suspended ?? current.suspended;
    const values = {
      version: current.version + 1,
      max_running_jobs: c.maxRunningJobs ?? current.maxRunningJobs,
      storage_quota_bytes: c.storageQuotaBytes ?? current.storageQuotaBytes,
      bandwidth_bytes_per_month: c.bandwidthBytesPerMonth ?? current.bandwidthBytesPerMonth,
      rate_card: rateCard === null ? null : JSON.stringify(rateCard),
      suspended: suspended ? 1 : 0,
      suspension_reason: suspended ? (c.suspension?.reason ?? current.suspensionReason) : null,
      suspended_since: suspended ? (current.suspended ? current.suspendedSince : changedAt) : null,
      changed_by: input.changedBy,
      changed_at: changedAt,
    };
    const written = await compareAndSetTenantRow(executorOf(tx), "tenant_controls", {
      tenantId: input.tenantId,
      readVersion: current.version,
      values,
    });
    if (written) {
      // A suspension lifted or a limit raised may let the tenant's queued jobs be placed now.
      await notifyAtCommit(executorOf(tx), JOB_CHANNELS.placement, tenantPlacementSubject(input.tenantId));
      if (c.credit !== undefined) {
        await executorOf(tx)
          .insertInto("usage_credits")
          .values({
            id: c.credit.id,
            tenant_id: input.tenantId,
            granted_at: changedAt,
            vcpu_seconds: c.credit.vcpuSeconds,
            amount_cents: c.credit.amountCents,
            job: c.credit.job,
            reason: c.credit.reason,
            granted_by: input.changedBy,
          })
          .execute();
      }
      return { kind: "written", version: values.version, changedAt };
    }
    const now = await readTenantControls(tx, input);
    return { kind: "stale", currentVersion: now?.version ?? current.version };
  });
}
