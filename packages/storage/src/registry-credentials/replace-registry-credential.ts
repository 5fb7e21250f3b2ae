import { inTransaction, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Makes a new version of the tenant's credential for `registry` the current one and marks the
 * prior current version superseded (it keeps its sealed value until every host acknowledged a
 * newer one: acknowledge-registry-credentials.ts). The version is the next after the highest
 * ever recorded, read and written in one transaction; two concurrent replacements of one
 * registry collide on the primary key and one fails rather than sharing a version.
 */
export async function replaceRegistryCredential(
  target: StorageOrTransaction,
  input: { tenantId: string; registry: string; ciphertext: string; replacedBy: string; now: Date },
): Promise<{ version: number }> {
  const now = formatTimestamp(input.now);
  return inTransaction(target, async (trx) => {
    const highest = await trx
      .selectFrom("registry_credentials")
      .select((eb) => eb.fn.max("version").as("version"))
      .where("tenant_id", "=", input.tenantId)
      .where("registry", "=", input.registry)
      .executeTakeFirst();
    const version = Number(highest?.version ?? 0) + 1;
    await trx
      .updateTable("registry_credentials")
      .set({ superseded_at: now })
      .where("tenant_id", "=", input.tenantId)
      .where("registry", "=", input.registry)
      .where("superseded_at", "is", null)
      .execute();
    await trx
      .insertInto("registry_credentials")
      .values({
        tenant_id: input.tenantId,
        registry: input.registry,
        version,
        ciphertext: input.ciphertext,
        replaced_by: input.replacedBy,
        replaced_at: now,
        superseded_at: null,
        removed_at: null,
      })
      .execute();
    return { version };
  });
}
