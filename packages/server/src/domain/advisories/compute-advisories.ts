import type { AdvisoryDetail as AdvisoryDetailSchema } from "@kiln/contract";
import { type AttemptReportRow, type Db, listDismissals, listRecentAttemptReports } from "@kiln/storage";
import {
  ADVISORY_WINDOW_ATTEMPTS,
  type AdvisoryKind,
  advisoryIdOf,
  type BasisAttempt,
  basisAttemptsOf,
  basisSignatureOf,
  remediationHref,
} from "./advisory-basis.js";
import { cpuSaturated } from "./cpu-saturated.js";
import { criticalPathCrate } from "./critical-path-crate.js";
import { lineageAlwaysCold } from "./lineage-always-cold.js";

export type AdvisoryDetail = (typeof AdvisoryDetailSchema)["static"];

/**
 * Every advisory kind. A kind advises only on evidence the hosts measure: CPU seconds of the
 * unit's cgroup, phase and crate timings from cargo's messages, lineage restore outcomes.
 */
export const ADVISORY_KINDS: readonly AdvisoryKind[] = [cpuSaturated, criticalPathCrate, lineageAlwaysCold];

/** The repository's advisories from its recent finished attempts (newest first), dismissed or not. */
export function computeAdvisories(repository: string, attempts: readonly BasisAttempt[]): AdvisoryDetail[] {
  return ADVISORY_KINDS.flatMap((kind) => kind(attempts)).map((finding) => ({
    id: advisoryIdOf(repository, finding),
    key: finding.key,
    measured_value: finding.measuredValue,
    basis_signature: basisSignatureOf(finding),
    recommendation: finding.recommendation,
    remediation_href: remediationHref(finding.key),
  }));
}

/**
 * The current advisories of some of the tenant's repositories, computed from each one's
 * ADVISORY_WINDOW_ATTEMPTS most recent finished attempts (one bounded read for all of them),
 * without the dismissed ones unless asked. Computed on read: nothing to keep in step with the
 * evidence, and a new basis shows at once.
 */
export async function readAdvisories(
  db: Db,
  input: { tenantId: string; repositories: readonly string[]; includeDismissed?: boolean },
): Promise<Map<string, AdvisoryDetail[]>> {
  const rows = await listRecentAttemptReports(db, {
    tenantId: input.tenantId,
    repositories: input.repositories,
    perRepository: ADVISORY_WINDOW_ATTEMPTS,
  });
  const rowsOf = new Map<string, AttemptReportRow[]>();
  for (const row of rows) rowsOf.set(row.repository, [...(rowsOf.get(row.repository) ?? []), row]);
  const advisories = new Map<string, AdvisoryDetail[]>();
  for (const repository of input.repositories) {
    advisories.set(repository, computeAdvisories(repository, basisAttemptsOf(rowsOf.get(repository) ?? [])));
  }
  if (input.includeDismissed === true) return advisories;
  const dismissed = await listDismissals(db, {
    tenantId: input.tenantId,
    advisories: [...advisories].flatMap(([repository, list]) => list.map((a) => ({ repository, advisory: a.id }))),
  });
  for (const [repository, list] of advisories) {
    const gone = dismissed.get(repository);
    if (gone !== undefined)
      advisories.set(
        repository,
        list.filter((a) => !gone.has(a.id)),
      );
  }
  return advisories;
}

/** An advisory as repositories.list shows it: the recommendation with its measured value. */
export const listedAdvisory = (repository: string, advisory: AdvisoryDetail) => ({
  id: advisory.id,
  repository,
  text: `${advisory.recommendation} (measured: ${advisory.measured_value})`,
  remediation_href: advisory.remediation_href,
});
