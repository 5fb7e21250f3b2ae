import { executorOf, type StorageOrTransaction } from "../executor.js";

export interface AdvisoryDismissal {
  readonly advisory: string;
  readonly dismissedBy: string;
  readonly dismissedAt: string;
}

/**
 * The dismissals among some advisory ids of the tenant's repositories, as repository → advisory
 * id → dismissal. Only the ids asked about are read (those computed now), so the answer stays as
 * small as the page however many dismissals accumulate.
 */
export async function listDismissals(
  target: StorageOrTransaction,
  input: { tenantId: string; advisories: readonly { repository: string; advisory: string }[] },
): Promise<Map<string, Map<string, AdvisoryDismissal>>> {
  const found = new Map<string, Map<string, AdvisoryDismissal>>();
  if (input.advisories.length === 0) return found;
  const rows = await executorOf(target)
    .selectFrom("advisory_dismissals")
    .select(["repository", "advisory", "dismissed_by", "dismissed_at"])
    .where("tenant_id", "=", input.tenantId)
    .where((eb) =>
      eb.or(
        input.advisories.map((a) => eb.and([eb("repository", "=", a.repository), eb("advisory", "=", a.advisory)])),
      ),
    )
    .execute();
  for (const row of rows) {
    const of = found.get(row.repository) ?? new Map<string, AdvisoryDismissal>();
    of.set(row.advisory, { advisory: row.advisory, dismissedBy: row.dismissed_by, dismissedAt: row.dismissed_at });
    found.set(row.repository, of);
  }
  return found;
}
