import { type Db, findInstallationOfRepository } from "@kiln/storage";
import { refuse } from "../refusal.js";

/**
 * Admission of a job (jobs.submit, jobs.retry) for a repository a claimed installation covers:
 * `conflict` when none of the tenant's installations covering it is active — the installation
 * was suspended or deleted on the provider, so kiln could neither report its check run nor
 * trust that the tenant still holds the repository. A repository no installation covers (one
 * onboarded by `kiln-server admin repo onboard`) is not affected.
 */
export async function requireActiveInstallation(db: Db, tenantId: string, repository: string): Promise<void> {
  const installation = await findInstallationOfRepository(db, { tenantId, repository });
  if (installation === undefined || installation.state === "active") return;
  refuse(
    "conflict",
    `repository ${repository} is covered by installation ${installation.installationId} of the source-hosting app, which is ${installation.state} on the provider; new jobs are refused until the installation is ${installation.state === "deleted" ? "installed and claimed again" : "unsuspended"}`,
  );
}
