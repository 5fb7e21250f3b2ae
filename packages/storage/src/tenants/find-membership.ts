import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { MembershipRole } from "../schema.js";

/** The person's membership of the tenant now (role and display name), or undefined when they are not a member. */
export async function findMembership(
  target: StorageOrTransaction,
  input: { tenantId: string; personId: string },
): Promise<{ role: MembershipRole; displayName: string } | undefined> {
  const row = await executorOf(target)
    .selectFrom("memberships")
    .innerJoin("persons", "persons.id", "memberships.person_id")
    .select(["memberships.role", "persons.display_name"])
    .where("memberships.tenant_id", "=", input.tenantId)
    .where("memberships.person_id", "=", input.personId)
    .executeTakeFirst();
  return row === undefined ? undefined : { role: row.role, displayName: row.display_name };
}
