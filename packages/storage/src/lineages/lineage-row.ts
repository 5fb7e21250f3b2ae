import type { Selectable } from "kysely";
import { type Kysely, sql } from "kysely";
import type { Database, LineagesTable } from "../schema.js";

export type LineageRow = Selectable<LineagesTable>;

/** Bytes the tenant's live lineages hold (purged and evicted ones hold none). */
export async function liveLineageBytes(db: Kysely<Database>, tenantId: string, repository?: string): Promise<number> {
  let query = db
    .selectFrom("lineages")
    // sum() of a bigint is numeric on PostgreSQL: cast back so both engines answer an integer.
    .select(sql<number>`cast(coalesce(sum(bytes), 0) as bigint)`.as("total"))
    .where("tenant_id", "=", tenantId)
    .where("state", "=", "live");
  if (repository !== undefined) query = query.where("repository", "=", repository);
  const row = await query.executeTakeFirst();
  return Number(row?.total ?? 0);
}

/** The live lineages of some of the tenant's repositories, by repository then class. */
export async function liveLineagesOf(
  db: Kysely<Database>,
  tenantId: string,
  repositories: readonly string[],
): Promise<LineageRow[]> {
  if (repositories.length === 0) return [];
  return db
    .selectFrom("lineages")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("repository", "in", repositories)
    .where("state", "=", "live")
    .orderBy("repository")
    .orderBy("class")
    .execute();
}
