import { findInstallationOfRepository } from "@kiln/storage";
import { refuse } from "../../../domain/refusal.js";
import { repositoryOfPath, requireOnboarded } from "../../../domain/repositories/require-onboarded.js";
import { ProviderError } from "../../../domain/source-hosting/github-app.js";
import { type Handler, principalOf } from "../../http/handler.js";

const COMMIT_ID = /^[0-9a-f]{40}$/;

/**
 * repositories.admission: confirms the repository is onboarded for the tenant and resolves
 * base_ref's merge base. A full commit id is its own merge base, answered without the provider.
 * A branch or tag is resolved through the source-hosting app: the merge base of base_ref
 * against the repository's default branch (the provider's compare API), through the tenant's
 * installation covering the repository. Without a configured app, or without a claimed active
 * installation covering the repository, or when the provider refuses or fails, it is
 * `upstream_failed` naming why.
 */
export const repositoryAdmission: Handler<"repositories.admission"> = async (ctx) => {
  const repository = repositoryOfPath(ctx.params);
  const tenantId = principalOf(ctx).tenantId;
  await requireOnboarded(ctx.db, tenantId, repository);
  const baseRef = ctx.query.base_ref;
  if (COMMIT_ID.test(baseRef)) return { merge_base: baseRef };
  const app = ctx.deps.gitHubApp;
  if (app === undefined) {
    return refuse(
      "upstream_failed",
      `query.base_ref ${JSON.stringify(baseRef)} is not a commit id, and resolving a branch or tag needs the repository's source-hosting provider, which this runtime has no connection to; pass the exact 40-character commit id`,
    );
  }
  const installation = await findInstallationOfRepository(ctx.db, { tenantId, repository });
  if (installation === undefined || installation.state !== "active") {
    return refuse(
      "upstream_failed",
      installation === undefined
        ? `no installation of the source-hosting app claimed by this tenant covers ${repository}, so query.base_ref ${JSON.stringify(baseRef)} cannot be resolved; claim the installation, or pass the exact 40-character commit id`
        : `the app installation covering ${repository} is ${installation.state}, so query.base_ref ${JSON.stringify(baseRef)} cannot be resolved`,
    );
  }
  try {
    return { merge_base: await app.mergeBase(installation.installationId, repository, baseRef) };
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error;
    return refuse(
      "upstream_failed",
      `the provider did not resolve query.base_ref ${JSON.stringify(baseRef)} of ${repository}: ${error.message}`,
    );
  }
};
