import { executorOf, type StorageOrTransaction } from "../executor.js";
import { sumUploadedBytes } from "../usage/sum-uploaded-bytes.js";

/** What a tenant consumes now, against its operator-set limits. */
export interface TenantConsumption {
  /** Jobs running or being cancelled (their attempts still hold a slot). */
  readonly runningJobs: number;
  /** Bytes the tenant's live lineages hold (what the storage quota counts). */
  readonly storageBytes: number;
  /**
   * Source bytes uploaded since the start of the calendar month (UTC) of `now`: streamed parts
   * (not reused) and inline sources' files (sumUploadedBytes).
   */
  readonly bandwidthBytesThisMonth: number;
}

/** Statuses that hold one of the tenant's running slots (claim-next-job counts the same). */
export const SLOT_HOLDING_STATUSES = ["running", "cancellation_requested"] as const;

/** Reads the three consumption figures; three aggregate reads, each over one tenant's rows. */
export async function readTenantConsumption(
  target: StorageOrTransaction,
  input: { tenantId: string; now: Date },
): Promise<TenantConsumption> {
  const db = executorOf(target);
  const monthStart = new Date(Date.UTC(input.now.getUTCFullYear(), input.now.getUTCMonth(), 1));
  const [running, storage, bandwidth] = await Promise.all([
    db
      .selectFrom("jobs")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("tenant_id", "=", input.tenantId)
      .where("status", "in", [...SLOT_HOLDING_STATUSES])
      .executeTakeFirst(),
    db
      .selectFrom("lineages")
      .select((eb) => eb.fn.coalesce(eb.fn.sum<number>("bytes"), eb.lit(0)).as("n"))
      .where("tenant_id", "=", input.tenantId)
      .where("state", "=", "live")
      .executeTakeFirst(),
    sumUploadedBytes(db, { tenantId: input.tenantId, since: monthStart }),
  ]);
  return {
    runningJobs: Number(running?.n ?? 0),
    storageBytes: Number(storage?.n ?? 0),
    bandwidthBytesThisMonth: bandwidth,
  };
}
