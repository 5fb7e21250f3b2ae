import { type Db, readTenantControls } from "@kiln/storage";
/**
 * The tenant storage quota: bytes a tenant's live lineages may hold before the least recently
 * used ones are evicted (storage's lineages/record-lineage-save.ts). The platform default
 * (tests and embedders may pass another through AppDeps / the local host) applies unless the
 * operator set the tenant's own (operator.tenants.controls, read at each lineage save).
 */
export const PLATFORM_STORAGE_QUOTA_BYTES = 20 * 2 ** 30;

/** The platform quota under the given override (a tenant's own control, when set, wins). */
export function storageQuotaBytes(override: number | undefined): number {
  return override ?? PLATFORM_STORAGE_QUOTA_BYTES;
}

/** A tenant's storage quota: its own when the operator set one, else the platform's. */
export async function tenantStorageQuota(
  ctx: { readonly db: Db; readonly deps: { readonly storageQuotaBytes?: number } },
  tenantId: string,
): Promise<number> {
  const controls = await readTenantControls(ctx.db, { tenantId });
  return controls?.storageQuotaBytes ?? storageQuotaBytes(ctx.deps.storageQuotaBytes);
}
