import { executorOf, type StorageOrTransaction } from "../executor.js";

/** The rate card as stored (JSON): prices in US cents. */
export interface StoredRateCard {
  readonly cents_per_vcpu_second: number;
  /** Per-size prices; a size left out costs cents_per_vcpu_second. */
  readonly cents_per_vcpu_second_by_size?: Readonly<Partial<Record<string, number>>>;
  readonly cents_per_gib_month: number;
  readonly cents_per_gib_uploaded?: number;
}

/** A tenant's operator-set controls; a null limit is "the platform default". */
export interface StoredTenantControls {
  readonly tenantId: string;
  readonly version: number;
  readonly maxRunningJobs: number | null;
  readonly storageQuotaBytes: number | null;
  readonly bandwidthBytesPerMonth: number | null;
  readonly rateCard: StoredRateCard | null;
  readonly suspended: boolean;
  readonly suspensionReason: string | null;
  readonly suspendedSince: string | null;
  /** Null while never set. */
  readonly changedBy: string | null;
  readonly changedAt: string | null;
}

/**
 * The controls of one tenant: its row, or — before the operator's first change — version 0
 * with platform defaults, not suspended. Undefined when the tenant does not exist.
 */
export async function readTenantControls(
  target: StorageOrTransaction,
  input: { tenantId: string },
): Promise<StoredTenantControls | undefined> {
  const row = await executorOf(target)
    .selectFrom("tenants as t")
    .leftJoin("tenant_controls as c", "c.tenant_id", "t.id")
    .select([
      "t.id",
      "c.version",
      "c.max_running_jobs",
      "c.storage_quota_bytes",
      "c.bandwidth_bytes_per_month",
      "c.rate_card",
      "c.suspended",
      "c.suspension_reason",
      "c.suspended_since",
      "c.changed_by",
      "c.changed_at",
    ])
    .where("t.id", "=", input.tenantId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    tenantId: row.id,
    version: row.version ?? 0,
    maxRunningJobs: row.max_running_jobs,
    storageQuotaBytes: row.storage_quota_bytes,
    bandwidthBytesPerMonth: row.bandwidth_bytes_per_month,
    rateCard: row.rate_card === null ? null : (JSON.parse(row.rate_card) as StoredRateCard),
    suspended: Boolean(row.suspended ?? 0),
    suspensionReason: row.suspension_reason,
    suspendedSince: row.suspended_since,
    changedBy: row.changed_by,
    changedAt: row.changed_at,
  };
}
