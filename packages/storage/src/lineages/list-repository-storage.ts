import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage } from "../pagination/keyset-page.js";
import { type LineageRow, liveLineageBytes, liveLineagesOf } from "./lineage-row.js";

export interface RepositoryStorage {
  readonly repository: string;
  /** Bytes its live lineages hold. */
  readonly totalBytes: number;
}

export interface RepositoryStoragePage {
  readonly repositories: readonly RepositoryStorage[];
  /** The live lineages of the repositories on this page. */
  readonly lineages: readonly LineageRow[];
  /** Bytes all of the tenant's live lineages hold. */
  readonly tenantBytes: number;
  readonly nextCursor: string | null;
}

/**
 * A page of the tenant's onboarded repositories (keyset by name) with what their live
 * lineages hold. Plain reads; totals are sums over the lineage rows, never stored.
 */
export async function listRepositoryStorage(
  target: StorageOrTransaction,
  input: { tenantId: string; limit: number; cursor: string | null },
): Promise<RepositoryStoragePage> {
  const db = executorOf(target);
  const page = await fetchKeysetPage(
    db.selectFrom("repositories").select("name").where("tenant_id", "=", input.tenantId),
    { sort: [["name", "asc", "text"]], limit: input.limit, cursor: input.cursor },
  );
  const names = page.rows.map((r) => r.name);
  const lineages = await liveLineagesOf(db, input.tenantId, names);
  const bytesOf = new Map<string, number>();
  for (const l of lineages) bytesOf.set(l.repository, (bytesOf.get(l.repository) ?? 0) + l.bytes);
  return {
    repositories: names.map((name) => ({ repository: name, totalBytes: bytesOf.get(name) ?? 0 })),
    lineages,
    tenantBytes: await liveLineageBytes(db, input.tenantId),
    nextCursor: page.nextCursor,
  };
}
