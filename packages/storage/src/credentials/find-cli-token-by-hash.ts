import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { MembershipRole } from "../schema.js";

export interface CliTokenHolder {
  id: string;
  tenant_id: string;
  person_id: string;
  display_name: string;
  /** The person's current role in the token's tenant: a token carries the role, not a copy of it. */
  role: MembershipRole;
  revoked_at: string | null;
}

/** The token with this hash and its holder's current membership; undefined if either is gone. */
export async function findCliTokenByHash(
  target: StorageOrTransaction,
  tokenHash: string,
): Promise<CliTokenHolder | undefined> {
  return executorOf(target)
    .selectFrom("cli_tokens")
    .innerJoin("memberships", (join) =>
      join
        .onRef("memberships.tenant_id", "=", "cli_tokens.tenant_id")
        .onRef("memberships.person_id", "=", "cli_tokens.person_id"),
    )
    .innerJoin("persons", "persons.id", "cli_tokens.person_id")
    .select([
      "cli_tokens.id",
      "cli_tokens.tenant_id",
      "cli_tokens.person_id",
      "persons.display_name",
      "memberships.role",
      "cli_tokens.revoked_at",
    ])
    .where("cli_tokens.token_hash", "=", tokenHash)
    .executeTakeFirst();
}
