import { UnknownTenantError } from "../errors.js";
import { inTransaction, type StorageOrTransaction } from "../executor.js";
import type { RepositoriesTable } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

export interface OnboardedRepository {
  tenantId: string;
  /** `owner/name`. */
  name: string;
  onboardedAt: string;
  onboardedBy: string;
}

/**
 * Onboards `owner/name` for the tenant, or returns the existing record with `created: false`
 * (onboarding twice is not an error; the first onboarding's time and principal are kept).
 * The name's syntax is the caller's to check; this stores what it is given.
 */
export async function onboardRepository(
  target: StorageOrTransaction,
  input: { tenantId: string; name: string; onboardedBy: string },
  now: Date,
): Promise<{ repository: OnboardedRepository; created: boolean }> {
  return inTransaction(target, async (db) => {
    const tenant = await db.selectFrom("tenants").select("id").where("id", "=", input.tenantId).executeTakeFirst();
    if (tenant === undefined) {
      throw new UnknownTenantError(input.tenantId);
    }
    const inserted = await db
      .insertInto("repositories")
      .values({
        tenant_id: input.tenantId,
        name: input.name,
        onboarded_at: formatTimestamp(now),
        onboarded_by: input.onboardedBy,
      })
      .onConflict((conflict) => conflict.columns(["tenant_id", "name"]).doNothing())
      .executeTakeFirst();
    const row = await db
      .selectFrom("repositories")
      .selectAll()
      .where("tenant_id", "=", input.tenantId)
      .where("name", "=", input.name)
      .executeTakeFirstOrThrow();
    return { repository: repositoryFromRow(row), created: inserted.numInsertedOrUpdatedRows === 1n };
  });
}

function repositoryFromRow(row: RepositoriesTable): OnboardedRepository {
  return { tenantId: row.tenant_id, name: row.name, onboardedAt: row.onboarded_at, onboardedBy: row.onboarded_by };
}
