import { executorOf, type StorageOrTransaction } from "../executor.js";

/** How a person is shown to the people of a tenant: their name and email address. */
export interface PersonName {
  readonly displayName: string;
  readonly email: string;
}

/**
 * The names of the given people (`usr_…` ids, as records name who acted) who are members of the
 * tenant — a page shows people, not ids. Ids of anyone else (another tenant's person, an agent
 * credential's principal) are left out: a tenant never learns who someone outside it is.
 */
export async function namesOfPeople(
  target: StorageOrTransaction,
  input: { tenantId: string; ids: readonly string[] },
): Promise<Map<string, PersonName>> {
  const ids = [...new Set(input.ids.filter((id) => id.startsWith("usr_")))];
  if (ids.length === 0) return new Map();
  const rows = await executorOf(target)
    .selectFrom("persons as p")
    .innerJoin("memberships as m", "m.person_id", "p.id")
    .select(["p.id", "p.display_name", "p.email"])
    .where("m.tenant_id", "=", input.tenantId)
    .where("p.id", "in", ids)
    .execute();
  return new Map(rows.map((row) => [row.id, { displayName: row.display_name, email: row.email }]));
}
