/**
 * The tenant storage quota: bytes a tenant's live lineages may hold before the least recently
 * used ones are evicted (storage's lineages/record-lineage-save.ts). The platform default
 * applies unless operator controls say otherwise; those do not exist yet, so every tenant
 * gets the default (tests and embedders may pass another through AppDeps / the local host).
 */
export const PLATFORM_STORAGE_QUOTA_BYTES = 20 * 2 ** 30;

/** The quota of a tenant under the given override (there are no per-tenant controls yet). */
export function storageQuotaBytes(override: number | undefined): number {
  return override ?? PLATFORM_STORAGE_QUOTA_BYTES;
}
