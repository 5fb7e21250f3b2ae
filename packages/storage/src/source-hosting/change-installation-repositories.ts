import { inTransaction, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { coverRepository } from "./installations.js";

/**
 * The provider's report that repositories were added to or removed from a claimed installation
 * (`installation_repositories`): added ones are covered and onboarded for the holding tenant
 * (onboarding twice keeps the first); removed ones are no longer covered (their onboarding and
 * job history stay, as a repository onboarded by hand would). Returns false when no tenant holds
 * the installation.
 */
export async function changeInstallationRepositories(
  target: StorageOrTransaction,
  input: { installationId: number; added: readonly string[]; removed: readonly string[]; by: string },
  at: Date,
): Promise<boolean> {
  return inTransaction(target, async (db) => {
    const now = formatTimestamp(at);
    const id = String(input.installationId);
    const row = await db
      .selectFrom("app_installations")
      .select("tenant_id")
      .where("installation_id", "=", id)
      .executeTakeFirst();
    if (row === undefined) return false;
    if (input.removed.length > 0) {
      await db
        .deleteFrom("installation_repositories")
        .where("installation_id", "=", id)
        .where("repository", "in", [...input.removed])
        .execute();
    }
    for (const repository of new Set(input.added)) {
      await coverRepository(db, id, row.tenant_id, repository, input.by, now);
    }
    await db.updateTable("app_installations").set({ updated_at: now }).where("installation_id", "=", id).execute();
    return true;
  });
}
