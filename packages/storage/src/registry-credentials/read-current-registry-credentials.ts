import { executorOf, type StorageOrTransaction } from "../executor.js";

export interface SealedRegistryCredential {
  readonly registry: string;
  readonly version: number;
  readonly ciphertext: string;
}

/** The tenant's current credential for each private registry it configured (sealed). */
export async function readCurrentRegistryCredentials(
  target: StorageOrTransaction,
  input: { tenantId: string },
): Promise<SealedRegistryCredential[]> {
  const rows = await executorOf(target)
    .selectFrom("registry_credentials")
    .select(["registry", "version", "ciphertext"])
    .where("tenant_id", "=", input.tenantId)
    .where("superseded_at", "is", null)
    .where("ciphertext", "is not", null)
    .orderBy("registry")
    .execute();
  return rows.map((row) => ({ registry: row.registry, version: row.version, ciphertext: row.ciphertext ?? "" }));
}
