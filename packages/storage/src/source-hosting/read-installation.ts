import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { InstallationRow, InstallationState } from "./installations.js";

/** A claimed installation by its provider id (whichever tenant holds it), or undefined. */
export async function readInstallation(
  target: StorageOrTransaction,
  input: { installationId: number },
): Promise<InstallationRow | undefined> {
  const row = await executorOf(target)
    .selectFrom("app_installations")
    .selectAll()
    .where("installation_id", "=", String(input.installationId))
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    installationId: Number(row.installation_id),
    tenantId: row.tenant_id,
    account: row.account,
    state: row.state as InstallationState,
    claimedBy: row.claimed_by,
    claimedAt: row.claimed_at,
  };
}
