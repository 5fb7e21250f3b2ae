import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";

/** An operator's credit as stored (positive amounts; the ledger negates them). */
export interface UsageCreditRow {
  readonly id: string;
  readonly granted_at: string;
  readonly vcpu_seconds: number;
  readonly amount_cents: number;
  readonly job: string | null;
  readonly reason: string;
  readonly granted_by: string;
}

/**
 * A page of a tenant's operator credits granted in [from, to) and by `grantedBy`, oldest first
 * (keyset on granted_at, id).
 */
export async function listUsageCredits(
  target: StorageOrTransaction,
  input: { tenantId: string; from: string; to: string; grantedBy: string; limit: number; cursor?: string | null },
): Promise<KeysetPage<UsageCreditRow>> {
  const query = executorOf(target)
    .selectFrom("usage_credits")
    .select(["id", "granted_at", "vcpu_seconds", "amount_cents", "job", "reason", "granted_by"])
    .where("tenant_id", "=", input.tenantId)
    .where("granted_at", ">=", input.from)
    .where("granted_at", "<", input.to)
    .where("granted_at", "<=", input.grantedBy);
  const page = await fetchKeysetPage(query, {
    sort: [
      ["granted_at", "asc", "text"],
      ["id", "asc", "text"],
    ],
    limit: input.limit,
    cursor: input.cursor ?? null,
  });
  // bigint columns come back as text from pg.
  return {
    ...page,
    rows: page.rows.map((r) => ({ ...r, vcpu_seconds: Number(r.vcpu_seconds), amount_cents: Number(r.amount_cents) })),
  };
}
