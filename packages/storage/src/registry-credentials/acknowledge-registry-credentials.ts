import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";

/** A version of a registry credential a host still holds (an attempt in flight fetched it). */
export interface HeldRegistryCredential {
  readonly tenantId: string;
  readonly registry: string;
  readonly version: number;
}

/**
 * Records what `hostId` acknowledges — for every registry credential of every tenant, that it
 * will use the current version from now on, except where an attempt in flight still holds an
 * older one (`held`, the oldest per credential) — and then removes every superseded version
 * older than what all enrolled hosts acknowledged (its sealed value becomes null): the spec's
 * "removes the prior value once every host acknowledges". Returns how many it removed.
 *
 * Locking: one transaction; the removal reads the acknowledgements and writes conditionally on
 * `ciphertext is not null`, so two hosts acknowledging at once can both attempt it and only
 * remove values every host has passed. A host enrolled after a replacement has no row for that
 * credential until its first acknowledgement, so a value is never removed before it has spoken.
 */
export async function acknowledgeRegistryCredentials(
  storage: Storage,
  input: { hostId: string; held: readonly HeldRegistryCredential[]; now: Date },
): Promise<number> {
  const now = formatTimestamp(input.now);
  return storage.transaction(async (trx) => {
    const current = await trx
      .selectFrom("registry_credentials")
      .select(["tenant_id", "registry", "version"])
      .where("superseded_at", "is", null)
      .execute();
    for (const credential of current) {
      const held = input.held
        .filter((h) => h.tenantId === credential.tenant_id && h.registry === credential.registry)
        .reduce((oldest, h) => Math.min(oldest, h.version), credential.version);
      await trx
        .insertInto("registry_credential_acks")
        .values({
          tenant_id: credential.tenant_id,
          registry: credential.registry,
          host_id: input.hostId,
          version: held,
          acknowledged_at: now,
        })
        .onConflict((c) =>
          c.columns(["tenant_id", "registry", "host_id"]).doUpdateSet({ version: held, acknowledged_at: now }),
        )
        .execute();
    }
    const hosts = await trx.selectFrom("hosts").select("id").execute();
    let removed = 0;
    for (const credential of current) {
      const acks = await trx
        .selectFrom("registry_credential_acks")
        .select(["host_id", "version"])
        .where("tenant_id", "=", credential.tenant_id)
        .where("registry", "=", credential.registry)
        .execute();
      const acked = new Map(acks.map((a) => [a.host_id, a.version]));
      if (hosts.some((h) => acked.get(h.id) === undefined)) continue;
      const everyHostPast = Math.min(...hosts.map((h) => acked.get(h.id) ?? 0));
      const result = await trx
        .updateTable("registry_credentials")
        .set({ ciphertext: null, removed_at: now })
        .where("tenant_id", "=", credential.tenant_id)
        .where("registry", "=", credential.registry)
        .where("version", "<", everyHostPast)
        .where("ciphertext", "is not", null)
        .where("superseded_at", "is not", null)
        .executeTakeFirst();
      removed += Number(result.numUpdatedRows);
    }
    return removed;
  });
}
