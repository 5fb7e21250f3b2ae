import type { HandlerContext } from "../handlers/handler.js";
import { refuse } from "../http/refusal.js";

/** not_found unless the repository is onboarded for the tenant. */
export async function requireOnboarded(ctx: HandlerContext, tenantId: string, repository: string): Promise<void> {
  const onboarded = await ctx.db
    .selectFrom("repositories")
    .select("name")
    .where("tenant_id", "=", tenantId)
    .where("name", "=", repository)
    .executeTakeFirst();
  if (onboarded === undefined) refuse("not_found", `repository ${repository} is not onboarded for this tenant`);
}

/** The `owner/name` a repository route's path names. */
export const repositoryOfPath = (ctx: HandlerContext): string =>
  `${String(ctx.params.owner)}/${String(ctx.params.name)}`;
