import type { Kysely, Updateable } from "kysely";
import type { Database } from "../schema.js";

/** The tenant's versioned policy tables: one row per tenant, written by compare-and-set on `version`. */
type VersionedTenantTable = "tenant_controls" | "tenant_settings";

/**
 * Writes the tenant's row of a versioned policy table only if it is still at `readVersion`
 * (version 0: no row yet, so the first writer inserts and a racing second one finds a
 * conflict). True when written; false means another writer moved it first — the caller
 * answers stale with the version it reads back.
 */
export async function compareAndSetTenantRow<T extends VersionedTenantTable>(
  db: Kysely<Database>,
  table: T,
  input: { tenantId: string; readVersion: number; values: Updateable<Database[T]> & { version: number } },
): Promise<boolean> {
  // The two tables share the shape this needs (tenant_id, version); Kysely cannot see that
  // through the union of their names, hence the casts.
  if (input.readVersion === 0) {
    const inserted = await db
      .insertInto(table as "tenant_settings")
      .values({ tenant_id: input.tenantId, ...input.values } as never)
      .onConflict((oc) => oc.column("tenant_id").doNothing())
      .executeTakeFirst();
    return Number(inserted.numInsertedOrUpdatedRows ?? 0) === 1;
  }
  const updated = await db
    .updateTable(table as "tenant_settings")
    .set(input.values as never)
    .where("tenant_id", "=", input.tenantId)
    .where("version", "=", input.readVersion)
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) === 1;
}
