import { refuse } from "../http/refusal.js";
import { repositoryOfPath, requireOnboarded } from "../repositories/require-onboarded.js";
import { type Handler, principalOf } from "./handler.js";

const COMMIT_ID = /^[0-9a-f]{40}$/;

/**
 * repositories.admission: confirms the repository is onboarded for the tenant and resolves
 * base_ref's merge base where this runtime can. Without a source-hosting provider connection
 * the runtime holds no refs or history, so it resolves only what needs none: a full commit id
 * is its own merge base with the captured workspace's declared base. A branch or tag name
 * needs the provider (the source-hosting issue) and is refused `upstream_failed` naming that.
 */
export const repositoryAdmission: Handler<"repositories.admission"> = async (ctx) => {
  const repository = repositoryOfPath(ctx.params);
  await requireOnboarded(ctx.db, principalOf(ctx).tenantId, repository);
  const baseRef = ctx.query.base_ref;
  if (COMMIT_ID.test(baseRef)) return { merge_base: baseRef };
  return refuse(
    "upstream_failed",
    `query.base_ref ${JSON.stringify(baseRef)} is not a commit id, and resolving a branch or tag needs the repository's source-hosting provider, which this runtime has no connection to; pass the exact 40-character commit id`,
  );
};
