import { executorOf, type StorageOrTransaction } from "../executor.js";

/** A lineage a job whose own lineage is new may start from (lineage seeding, issue 38). */
export interface LineageSeed {
  readonly lineage: string;
  readonly repository: string;
  readonly class: string;
}

/** Most candidates offered to the host, most recently used first (the host ranks them by shared locked crates). */
export const MAX_LINEAGE_SEEDS = 8;

/**
 * The lineages a job of (tenant, repository, class) placed on `host` may be seeded from: none
 * when the job's own lineage is live on that host (it restores warm there), else the same
 * tenant's live lineages on that host whose dependency builds were compiled with the same
 * `seedContext` (job class, injected settings, target and flags: cargo would find them fresh),
 * most recently used first, at most `limit`. Never another tenant's: the tenant is the first
 * key of the read. One read, no lock: a lineage purged or evicted after it is still whole on the
 * host for this attempt, and the seeded lineage is a copy accounted on its own.
 */
export async function findLineageSeeds(
  target: StorageOrTransaction,
  input: {
    tenantId: string;
    repository: string;
    class: string;
    host: string;
    seedContext: string;
    limit?: number;
  },
): Promise<LineageSeed[]> {
  const db = executorOf(target);
  const own = await db
    .selectFrom("lineages")
    .select(["host", "state"])
    .where("tenant_id", "=", input.tenantId)
    .where("repository", "=", input.repository)
    .where("class", "=", input.class)
    .executeTakeFirst();
  if (own !== undefined && own.state === "live" && own.host === input.host) return [];
  return db
    .selectFrom("lineages")
    .select(["lineage", "repository", "class"])
    .where("tenant_id", "=", input.tenantId)
    .where("host", "=", input.host)
    .where("seed_context", "=", input.seedContext)
    .where("state", "=", "live")
    .where((w) => w.or([w("repository", "!=", input.repository), w("class", "!=", input.class)]))
    .orderBy("last_used_at", "desc")
    .orderBy("lineage")
    .limit(input.limit ?? MAX_LINEAGE_SEEDS)
    .execute();
}
