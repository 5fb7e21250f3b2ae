import { executorOf, type StorageOrTransaction } from "../executor.js";

/** One tenant as the operator's list shows it. */
export interface ListedTenant {
  readonly id: string;
  readonly displayName: string;
  readonly createdAt: string;
  readonly suspended: boolean;
  readonly members: number;
}

/** Tenants by identifier, at most `limit`, and whether more follow. */
export async function listTenants(
  target: StorageOrTransaction,
  input: { limit: number },
): Promise<{ tenants: ListedTenant[]; more: boolean }> {
  const rows = await executorOf(target)
    .selectFrom("tenants as t")
    .leftJoin("tenant_controls as c", "c.tenant_id", "t.id")
    .select((eb) => [
      "t.id",
      "t.display_name",
      "t.created_at",
      "c.suspended",
      eb
        .selectFrom("memberships as m")
        .select((m) => m.fn.countAll<number>().as("n"))
        .whereRef("m.tenant_id", "=", "t.id")
        .as("members"),
    ])
    .orderBy("t.id")
    .limit(input.limit + 1)
    .execute();
  return {
    tenants: rows.slice(0, input.limit).map((row) => ({
      id: row.id,
      displayName: row.display_name,
      createdAt: row.created_at,
      suspended: Number(row.suspended ?? 0) === 1,
      members: Number(row.members ?? 0),
    })),
    more: rows.length > input.limit,
  };
}
