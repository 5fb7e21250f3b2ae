import { UnknownTenantError } from "../errors.js";
import { inTransaction, type StorageOrTransaction } from "../executor.js";
import { newPersonId } from "../ids.js";
import type { MembershipRole } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import { type Membership, membershipFromRow, normalizeEmail, type Person, personFromRow } from "./tenant.js";

/**
 * Makes the person with `email` a member of the tenant with `role`: creates the person when the
 * email is new (an existing person keeps their name), creates the membership, or changes the
 * role of an existing one. One transaction, and each write is an upsert, so two concurrent
 * calls for the same email converge on one person instead of failing.
 */
export async function addPersonToTenant(
  target: StorageOrTransaction,
  input: AddPersonToTenantInput,
  at: Date,
): Promise<AddPersonToTenantResult> {
  const email = normalizeEmail(input.email);
  const now = formatTimestamp(at);

  return inTransaction(target, async (db) => {
    const tenant = await db.selectFrom("tenants").select("id").where("id", "=", input.tenantId).executeTakeFirst();
    if (tenant === undefined) {
      throw new UnknownTenantError(input.tenantId);
    }

    const insertedPerson = await db
      .insertInto("persons")
      .values({ id: newPersonId(), email, display_name: input.displayName ?? email, created_at: now })
      .onConflict((conflict) => conflict.column("email").doNothing())
      .executeTakeFirst();
    const person = await db.selectFrom("persons").selectAll().where("email", "=", email).executeTakeFirstOrThrow();

    const previous = await db
      .selectFrom("memberships")
      .select("role")
      .where("tenant_id", "=", input.tenantId)
      .where("person_id", "=", person.id)
      .executeTakeFirst();
    const membership = await db
      .insertInto("memberships")
      .values({
        tenant_id: input.tenantId,
        person_id: person.id,
        role: input.role,
        organization_id: input.organizationId ?? input.tenantId,
        created_at: now,
      })
      .onConflict((conflict) =>
        conflict.columns(["tenant_id", "person_id"]).doUpdateSet((update) => ({ role: update.ref("excluded.role") })),
      )
      .returningAll()
      .executeTakeFirstOrThrow();

    return {
      person: personFromRow(person),
      membership: membershipFromRow(membership),
      personCreated: insertedPerson.numInsertedOrUpdatedRows === 1n,
      membershipChange:
        previous === undefined ? "created" : previous.role === input.role ? "unchanged" : "role_changed",
    };
  });
}

export interface AddPersonToTenantInput {
  tenantId: string;
  email: string;
  role: MembershipRole;
  /** Used only when the person is new; defaults to the email. */
  displayName?: string;
  /** The identity provider's organization; defaults to the tenant id (no provider). */
  organizationId?: string;
}

export interface AddPersonToTenantResult {
  person: Person;
  membership: Membership;
  personCreated: boolean;
  membershipChange: "created" | "role_changed" | "unchanged";
}
