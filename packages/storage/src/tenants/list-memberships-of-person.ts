import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { MembershipRole } from "../schema.js";

/** Every tenant the person belongs to, with role and organization, in tenant order. */
export async function listMembershipsOfPerson(
  target: StorageOrTransaction,
  personId: string,
): Promise<{ tenantId: string; role: MembershipRole; organizationId: string }[]> {
  const rows = await executorOf(target)
    .selectFrom("memberships")
    .select(["tenant_id", "role", "organization_id"])
    .where("person_id", "=", personId)
    .orderBy("tenant_id")
    .execute();
  return rows.map((r) => ({ tenantId: r.tenant_id, role: r.role, organizationId: r.organization_id }));
}
