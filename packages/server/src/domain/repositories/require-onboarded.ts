import { type Db, findOnboardedRepository } from "@kiln/storage";
import { refuse } from "../refusal.js";

/** not_found unless the repository is onboarded for the tenant. */
export async function requireOnboarded(db: Db, tenantId: string, repository: string): Promise<void> {
  const onboarded = await findOnboardedRepository(db, { tenantId, repository });
  if (onboarded === undefined) refuse("not_found", `repository ${repository} is not onboarded for this tenant`);
}

/** The `owner/name` a repository route's path names. */
export const repositoryOfPath = (params: { readonly owner: string; readonly name: string }): string =>
  `${params.owner}/${params.name}`;
