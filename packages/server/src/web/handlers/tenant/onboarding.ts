import type { ResponseDocumentOf } from "@kiln/contract";
import {
  appendAuditEntry,
  claimInstallation,
  type Db,
  listTenantInstallations,
  readOnboardingJobs,
} from "@kiln/storage";
import type { Principal } from "../../../domain/identity/principal.js";
import { refuse } from "../../../domain/refusal.js";
import { type GitHubApp, ProviderError } from "../../../domain/source-hosting/github-app.js";
import { GITHUB_CLAIM_SETUP_PATH } from "../../../domain/source-hosting/github-claim-paths.js";
import { type Handler, principalOf } from "../../http/handler.js";

/**
 * Whether the tenant holds an active installation of the source-hosting app: null when this
 * runtime has no app configured (it cannot claim one), as Identity and Onboarding say.
 */
export async function installationActive(
  deps: { readonly gitHubApp?: unknown },
  db: Db,
  tenantId: string,
): Promise<boolean | null> {
  if (deps.gitHubApp === undefined) return null;
  const installations = await listTenantInstallations(db, { tenantId });
  return installations.some((i) => i.state === "active");
}

/**
 * onboarding.surface: the app's installation state for the tenant, its installation page and
 * the claim route (null without a configured app), and the tenant's jobs: how many and the newest.
 */
export const onboardingSurface: Handler<"onboarding.surface"> = async (ctx) => {
  const tenantId = principalOf(ctx).tenantId;
  const app = ctx.deps.gitHubApp;
  const jobs = await readOnboardingJobs(ctx.db, { tenantId });
  return {
    installation_active: await installationActive(ctx.deps, ctx.db, tenantId),
    install_url: app === undefined ? null : app.installUrl,
    // The provider-authorized route when the app's OAuth client is configured; else the API's.
    claim_url:
      app === undefined
        ? null
        : app.verifiesClaims
          ? `${ctx.deps.publicOrigin}${GITHUB_CLAIM_SETUP_PATH}`
          : `${ctx.deps.publicOrigin}/api/onboarding/claims`,
    jobs_total: jobs.total,
    first_job: jobs.newest === null ? null : { id: jobs.newest.id, repository: jobs.newest.repository },
  };
};

/**
 * onboarding.claim (admin) by installation id alone. The person's authorization with the
 * provider cannot be checked from an API call (it needs the provider's OAuth web flow in their
 * browser), so this is refused `upstream_failed` pointing at the provider-authorized route
 * (`/onboarding/github/setup`, see web/pages/github-claim.ts), unless the runtime allows unverified
 * claims (KILN_GITHUB_ALLOW_UNVERIFIED_CLAIMS=1).
 */
export const claimOnboardingInstallation: Handler<"onboarding.claim"> = async (ctx) => {
  const principal = principalOf(ctx);
  const app =
    ctx.deps.gitHubApp ??
    refuse("upstream_failed", "no source-hosting app is configured on this runtime; there is no installation to claim");
  const installationId = ctx.body.installation_id;
  if (!app.allowUnverifiedClaims) {
    const route = app.verifiesClaims
      ? `open ${ctx.deps.publicOrigin}${GITHUB_CLAIM_SETUP_PATH}?installation_id=${installationId} in a browser signed in to kiln, which checks it with the provider`
      : "set KILN_GITHUB_CLIENT_ID and KILN_GITHUB_CLIENT_SECRET so kiln can check it with the provider, set KILN_GITHUB_ALLOW_UNVERIFIED_CLAIMS=1 on a single-organization install, or onboard with `kiln-server admin repo onboard`";
    return refuse(
      "upstream_failed",
      `installation ${installationId} cannot be claimed by its id alone: a claim needs the person's own authorization with the provider (${route})`,
    );
  }
  return claimInstallationForPerson(app, ctx.db, principal, installationId, ctx.clock.now());
};

/**
 * Binds an installation of the app to the person's tenant, once the person's right to it is
 * settled (their own installations as the provider listed them, or an install that allows
 * unverified claims). The installation must exist for the app (asked of the provider with the
 * app's JWT) and not be suspended; one tenant holds it (another tenant's claim is `conflict`);
 * its repositories, read through its installation token, become onboarded for the tenant.
 * Recorded with claimed_by and audited, in `db` (the caller's transaction).
 */
export async function claimInstallationForPerson(
  app: GitHubApp,
  db: Db,
  principal: Principal,
  installationId: number,
  now: Date,
): Promise<ResponseDocumentOf<"onboarding.claim">> {
  let account: string;
  let repositories: string[];
  try {
    const installation = await app.installation(installationId);
    if (installation.suspended) {
      return refuse(
        "conflict",
        `installation ${installationId} is suspended on the provider; unsuspend it to claim it`,
      );
    }
    account = installation.account;
    repositories = await app.installationRepositories(installationId);
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error;
    return refuse(
      "upstream_failed",
      error.status === 404
        ? `installation ${installationId} is not an installation of this app (the provider answered 404)`
        : `the provider refused or failed to confirm installation ${installationId}: ${error.message}`,
    );
  }
  const claimed = await claimInstallation(
    db,
    { installationId, tenantId: principal.tenantId, account, claimedBy: principal.principal, repositories },
    now,
  );
  if (claimed.kind === "held_by_another_tenant") {
    return refuse("conflict", `installation ${installationId} is already claimed by another tenant`);
  }
  await appendAuditEntry(
    db,
    {
      tenantId: principal.tenantId,
      actor: principal.principal,
      target: `installation:${installationId}`,
      value:
        `claimed (account ${account}; ${repositories.length} repositories onboarded: ${repositories.join(", ")})`.slice(
          0,
          4000,
        ),
      effective: "now",
    },
    now,
  );
  return {
    installation_id: installationId,
    tenant: principal.tenantId,
    claimed_by: claimed.installation.claimedBy,
  };
}
