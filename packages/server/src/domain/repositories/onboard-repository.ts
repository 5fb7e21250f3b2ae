import type { ResponseDocumentOf } from "@kiln/contract";
import { appendAuditEntry, inTransaction, onboardRepository, type StorageOrTransaction } from "@kiln/storage";

/**
 * Onboards `owner/name` for a tenant, whoever asks: a tenant admin (repositories.onboard, from
 * the CLI's `kiln repos add` or the Repositories page) or the server's administrator
 * (`kiln-server admin repo onboard`). Onboarding it again changes nothing and answers
 * `created: false` with the first onboarding's time and principal. A new onboarding is audited
 * in the same transaction. The name's syntax is the caller's to check (the operation's schema).
 */
export async function onboardTenantRepository(
  target: StorageOrTransaction,
  input: { readonly tenantId: string; readonly repository: string; readonly actor: string },
  now: Date,
): Promise<ResponseDocumentOf<"repositories.onboard">> {
  return inTransaction(target, async (db) => {
    const { repository, created } = await onboardRepository(
      db,
      { tenantId: input.tenantId, name: input.repository, onboardedBy: input.actor },
      now,
    );
    if (created) {
      await appendAuditEntry(
        db,
        {
          tenantId: input.tenantId,
          actor: input.actor,
          target: `repository:${input.repository}`,
          value: "onboarded (self-service; check runs still need the source-hosting app installed on it)",
          effective: "next job",
        },
        now,
      );
    }
    return {
      repository: repository.name,
      created,
      onboarded_at: repository.onboardedAt,
      onboarded_by: repository.onboardedBy,
    };
  });
}

/**
 * The refusal detail for a repository the tenant has not onboarded, naming the next step in
 * the words of whoever reads it: the command an admin runs, the page, or asking an admin.
 */
export const notOnboardedDetail = (repository: string): string =>
  `repository ${repository} is not onboarded for this tenant: a tenant admin onboards it with \`kiln repos add ${repository}\` (or on the dashboard's Repositories page, or by installing the GitHub App on it); if you are not an admin, ask one`;
