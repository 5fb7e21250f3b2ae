import type { Migration, MigrationProvider } from "kysely";
import type { DialectName } from "../dialect.js";
import { initialSchema } from "./0001-initial-schema.js";
import { credentials } from "./0002-credentials.js";
import { identity } from "./0003-identity.js";
import { jobs } from "./0004-jobs.js";
import { lineages } from "./0005-lineages.js";
import { sources } from "./0006-sources.js";
import { repositorySettings } from "./0007-repository-settings.js";
import { advisoryDismissals } from "./0008-advisory-dismissals.js";
import { registryCredentials } from "./0009-registry-credentials.js";
import { tenantPolicy } from "./0010-tenant-policy.js";
import { sourceHosting } from "./0011-source-hosting.js";
import { hostIdentities } from "./0012-host-identities.js";
import { hostDrain } from "./0013-host-drain.js";
import { auditNoReplace } from "./0014-audit-no-replace.js";
import { canariesAndAnomalies } from "./0015-canaries-and-anomalies.js";
import { hostRecovery } from "./0016-host-recovery.js";
import { dogfoodTrial } from "./0017-dogfood-trial.js";
import { hostFleet } from "./0018-host-fleet.js";
import { usageLedger } from "./0019-usage-ledger.js";
import { webhookDeliveries } from "./0020-webhook-deliveries.js";
import { hostActivations } from "./0021-host-activations.js";
import { inlineSourceBytes } from "./0022-inline-source-bytes.js";
import { hostCertificates } from "./0023-host-certificates.js";
import { jobEventTenantSequence } from "./0030-job-event-tenant-sequence.js";
import { artifactBlobs } from "./0035-artifact-blobs.js";
import { jobStatusCounts } from "./0037-job-status-counts.js";
import { sourceReservationsCoveringIndex } from "./0038-source-reservations-covering-index.js";
import { manifestsLz4 } from "./0039-manifests-lz4.js";
import { uploadManifestsDeflated } from "./0040-upload-manifests-deflated.js";
import { slidingWindowFunction } from "./0041-sliding-window-function.js";
import { jobManifests } from "./0042-job-manifests.js";
import { webhookDeliveryDigests } from "./0043-webhook-delivery-digests.js";
import { artifactExecutable } from "./0044-artifact-executable.js";
import { hostIsolationReason } from "./0045-host-isolation-reason.js";
import { testHistory } from "./0046-test-history.js";
import { lineageSeeding } from "./0047-lineage-seeding.js";
import { flakyRetriesSettings } from "./0048-flaky-retries-settings.js";
import { hostToolchains } from "./0049-host-toolchains.js";

/**
 * Every migration, by name. Names are `NNNN-what-it-does`; Kysely applies them in name order and
 * refuses to start if the database has applied one that is missing here, so never rename or
 * remove an entry — add a new one.
 *
 * In-code rather than read from a folder, so the compiled package carries its schema with it
 * and each migration can be told which engine it runs on.
 */
export function migrationsFor(dialect: DialectName): Record<string, Migration> {
  return {
    "0001-initial-schema": initialSchema(dialect),
    "0002-credentials": credentials(dialect),
    "0003-identity": identity(),
    "0004-jobs": jobs(dialect),
    "0005-lineages": lineages(),
    "0006-sources": sources(),
    "0007-repository-settings": repositorySettings(),
    "0008-advisory-dismissals": advisoryDismissals(),
    "0009-registry-credentials": registryCredentials(),
    "0010-tenant-policy": tenantPolicy(),
    "0011-source-hosting": sourceHosting(),
    "0012-host-identities": hostIdentities(),
    "0013-host-drain": hostDrain(),
    "0014-audit-no-replace": auditNoReplace(dialect),
    "0015-canaries-and-anomalies": canariesAndAnomalies(),
    "0016-host-recovery": hostRecovery(),
    "0017-dogfood-trial": dogfoodTrial(),
    "0018-host-fleet": hostFleet(dialect),
    "0019-usage-ledger": usageLedger(),
    "0020-webhook-deliveries": webhookDeliveries(),
    "0021-host-activations": hostActivations(),
    "0022-inline-source-bytes": inlineSourceBytes(),
    "0023-host-certificates": hostCertificates(),
    "0030-job-event-tenant-sequence": jobEventTenantSequence(dialect),
    "0035-artifact-blobs": artifactBlobs(),
    "0037-job-status-counts": jobStatusCounts(dialect),
    "0038-source-reservations-covering-index": sourceReservationsCoveringIndex(),
    "0039-manifests-lz4": manifestsLz4(dialect),
    "0040-upload-manifests-deflated": uploadManifestsDeflated(dialect),
    "0041-sliding-window-function": slidingWindowFunction(dialect),
    "0042-job-manifests": jobManifests(dialect),
    "0043-webhook-delivery-digests": webhookDeliveryDigests(),
    "0044-artifact-executable": artifactExecutable(),
    "0045-host-isolation-reason": hostIsolationReason(),
    "0046-test-history": testHistory(),
    "0047-lineage-seeding": lineageSeeding(),
    "0048-flaky-retries-settings": flakyRetriesSettings(),
    "0049-host-toolchains": hostToolchains(),
  };
}

export function migrationProviderFor(dialect: DialectName): MigrationProvider {
  return { getMigrations: async () => migrationsFor(dialect) };
}
