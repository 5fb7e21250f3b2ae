import { executorOf, type StorageOrTransaction } from "../executor.js";

export interface RegistryCredentialVersion {
  readonly registry: string;
  readonly version: number;
  readonly replacedBy: string;
  readonly replacedAt: string;
  readonly supersededAt: string | null;
  /** When the sealed value was removed (every host had acknowledged a newer version); null while kept. */
  readonly removedAt: string | null;
}

/** Every version of the tenant's registry credentials, newest first per registry; never a value. */
export async function listRegistryCredentialVersions(
  target: StorageOrTransaction,
  input: { tenantId: string },
): Promise<RegistryCredentialVersion[]> {
  const rows = await executorOf(target)
    .selectFrom("registry_credentials")
    .select(["registry", "version", "replaced_by", "replaced_at", "superseded_at", "removed_at"])
    .where("tenant_id", "=", input.tenantId)
    .orderBy("registry")
    .orderBy("version", "desc")
    .execute();
  return rows.map((r) => ({
    registry: r.registry,
    version: r.version,
    replacedBy: r.replaced_by,
    replacedAt: r.replaced_at,
    supersededAt: r.superseded_at,
    removedAt: r.removed_at,
  }));
}
