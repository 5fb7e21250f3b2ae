export type { Kysely } from "kysely";
export { dismissAdvisory } from "./advisories/dismiss-advisory.js";
export { type AdvisoryDismissal, listDismissals } from "./advisories/list-dismissals.js";
export { appendAuditEntry } from "./audit/append-audit-entry.js";
export { appendOperatorAuditEntry } from "./audit/append-operator-audit-entry.js";
export type { AppendAuditEntryInput, AuditEntry, AuditPage } from "./audit/audit-entry.js";
export { operatorAuditEntryExists } from "./audit/find-operator-audit-entry.js";
export { listAuditEntries } from "./audit/list-audit-entries.js";
export { listOperatorAuditEntries } from "./audit/list-operator-audit-entries.js";
export { LocalBlobStore } from "./blobs/local-blob-store.js";
export type { AgentCredentialRow } from "./credentials/agent-credential.js";
export { createAgentCredential } from "./credentials/create-agent-credential.js";
export { findAgentCredentialByHash } from "./credentials/find-agent-credential-by-hash.js";
export { type CliTokenHolder, findCliTokenByHash } from "./credentials/find-cli-token-by-hash.js";
export { issueCliToken } from "./credentials/issue-cli-token.js";
export { listAgentCredentials } from "./credentials/list-agent-credentials.js";
export { type CliTokenRow, listCliTokens } from "./credentials/list-cli-tokens.js";
export { recordLastUsed } from "./credentials/record-last-used.js";
export { revokeAgentCredential } from "./credentials/revoke-agent-credential.js";
export { revokeCliToken } from "./credentials/revoke-cli-token.js";
export { approveDeviceAuthorization } from "./devices/approve-device-authorization.js";
export { type DeviceAuthorizationRow, findDeviceAuthorization } from "./devices/find-device-authorization.js";
export { recordDevicePoll } from "./devices/record-device-poll.js";
export { redeemDeviceAuthorization } from "./devices/redeem-device-authorization.js";
export { startDeviceAuthorization } from "./devices/start-device-authorization.js";
export type { Capabilities, DialectName, Storage } from "./dialect.js";
export { InvalidCursorError, UnknownTenantError } from "./errors.js";
export { type Db, executorOf, inTransaction, type StorageOrTransaction } from "./executor.js";
export { createHostEnrollmentToken } from "./hosts/create-host-enrollment-token.js";
export { findAttemptHost } from "./hosts/find-attempt-host.js";
export { findHostCredentialByHash } from "./hosts/find-host-credential-by-hash.js";
export {
  drainHost,
  type HostIdentityRecords,
  type HostRecord,
  type HostStateChange,
  listHostIdentityRecords,
  listHostRecords,
  readHostRecord,
  undrainHost,
} from "./hosts/host-drain.js";
export { type EnrollmentRedemption, redeemHostEnrollmentToken } from "./hosts/redeem-host-enrollment-token.js";
export { revokeHostCredentials } from "./hosts/revoke-host-credentials.js";
export {
  type CompleteIdempotencyKeyInput,
  completeIdempotencyKey,
} from "./idempotency/complete-idempotency-key.js";
export { purgeExpiredIdempotencyKeys } from "./idempotency/purge-expired-idempotency-keys.js";
export { releaseIdempotencyKey } from "./idempotency/release-idempotency-key.js";
export {
  DEFAULT_RESERVATION_SECONDS,
  DEFAULT_RETENTION_SECONDS,
  type ReserveIdempotencyKeyInput,
  type ReserveIdempotencyKeyResult,
  reserveIdempotencyKey,
} from "./idempotency/reserve-idempotency-key.js";
export { appendLogRecords, type LogLine } from "./jobs/append-log-records.js";
export { type AttemptRow, claimNextJob } from "./jobs/claim-next-job.js";
export { findJobBySubmissionKey } from "./jobs/find-job-by-submission-key.js";
export { findLeasedAttempt } from "./jobs/find-leased-attempt.js";
export {
  type AttemptCompletion,
  type AttemptUsage,
  finishAttempt,
  type MeteredAttempt,
} from "./jobs/finish-attempt.js";
export { insertJob, type JobRow } from "./jobs/insert-job.js";
export { newJobId } from "./jobs/job-ids.js";
export { JOB_LIST_COLUMNS, type JobFilters, type JobListRow, listJobs } from "./jobs/list-jobs.js";
export { type AttemptReportRow, listRecentAttemptReports } from "./jobs/list-recent-attempt-reports.js";
export { type JobListRecord, type JobRecord, readJob, readJobRecords } from "./jobs/read-job.js";
export { type JobEventRow, latestJobEventSequence, readJobEvents } from "./jobs/read-job-events.js";
export { readJobStatus } from "./jobs/read-job-status.js";
export { decodeLogCursor, encodeLogCursor, readLogRecords } from "./jobs/read-log-page.js";
export { reclaimExpiredLeases } from "./jobs/reclaim-expired-leases.js";
export { recordTransition } from "./jobs/record-transition.js";
export { registerHost } from "./jobs/register-host.js";
export { type LeaseRenewal, renewAttemptLease } from "./jobs/renew-attempt-lease.js";
export { type CancellationResult, requestCancellation } from "./jobs/request-cancellation.js";
export { findLineageDrop, type LineageDrop } from "./lineages/find-lineage-drop.js";
export type { LineageRow } from "./lineages/lineage-row.js";
export {
  listRepositoryStorage,
  type RepositoryStorage,
  type RepositoryStoragePage,
} from "./lineages/list-repository-storage.js";
export { purgeLineage } from "./lineages/purge-lineage.js";
export { readRepositoryStorage } from "./lineages/read-repository-storage.js";
export { type LineageSave, type LineageSaveResult, recordLineageSave } from "./lineages/record-lineage-save.js";
export { type AppliedMigrations, migrateToLatest } from "./migrations/migrate-to-latest.js";
export { type OpenStorageOptions, openStorage } from "./open-storage.js";
export {
  findCurrentOperatorCredential,
  type OperatorCredentialRow,
  replaceOperatorCredential,
} from "./operator/operator-credential.js";
export {
  type CursorValue,
  type CursorValueKind,
  decodeCursor,
  encodeCursor,
  fetchKeysetPage,
  type KeysetPage,
  type KeysetPageOptions,
  type KeysetSortColumn,
  type SortDirection,
} from "./pagination/keyset-page.js";
export {
  admitRequestInSlidingWindow,
  type SlidingWindowAnswer,
} from "./rate-limits/admit-request-in-sliding-window.js";
export { countRequestInWindow, purgeRateWindows } from "./rate-limits/count-request-in-window.js";
export {
  acknowledgeRegistryCredentials,
  type HeldRegistryCredential,
} from "./registry-credentials/acknowledge-registry-credentials.js";
export {
  listRegistryCredentialVersions,
  type RegistryCredentialVersion,
} from "./registry-credentials/list-registry-credential-versions.js";
export {
  readCurrentRegistryCredentials,
  type SealedRegistryCredential,
} from "./registry-credentials/read-current-registry-credentials.js";
export { replaceRegistryCredential } from "./registry-credentials/replace-registry-credential.js";
export { findOnboardedRepository } from "./repositories/find-onboarded-repository.js";
export { type OnboardedRepository, onboardRepository } from "./repositories/onboard-repository.js";
export {
  readRepositorySettings,
  type StoredRepositorySettings,
} from "./repository-settings/read-repository-settings.js";
export {
  type RepositorySettingsChanges,
  type RepositorySettingsWriteResult,
  writeRepositorySettings,
} from "./repository-settings/write-repository-settings.js";
export {
  type Database,
  type LineageState,
  MEMBERSHIP_ROLES,
  type MembershipRole,
  type SourceUploadState,
} from "./schema.js";
export { createSession } from "./sessions/create-session.js";
export { createSignInLink } from "./sessions/create-sign-in-link.js";
export { endSession } from "./sessions/end-session.js";
export { findLiveSession } from "./sessions/find-live-session.js";
export { redeemSignInLink } from "./sessions/redeem-sign-in-link.js";
export {
  type CheckRunStage,
  type DueCheckRun,
  leaseCheckRun,
  listDueCheckRuns,
  readCheckRun,
  recordCheckRunFailure,
  recordCheckRunReported,
} from "./source-hosting/check-runs.js";
export {
  type ClaimInstallationResult,
  claimInstallation,
  findInstallationOfRepository,
  type InstallationRow,
  type InstallationState,
  listTenantInstallations,
  readOnboardingJobs,
  syncInstallation,
} from "./source-hosting/installations.js";
export { attachHeldChunks } from "./sources/attach-held-chunks.js";
export { claimUpload } from "./sources/claim-upload.js";
export { cleanupExpiredUploads } from "./sources/cleanup-expired-uploads.js";
export { completeUpload, type UploadCompletion } from "./sources/complete-upload.js";
export {
  readUpload,
  readUploadForPart,
  readUploadManifest,
  readUploadPart,
  readUploadParts,
  type SourceUploadHeader,
} from "./sources/read-upload.js";
export {
  findTenantChunk,
  type RecordUploadPartResult,
  recordUploadPart,
  type UploadPart,
} from "./sources/record-upload-part.js";
export { type ReserveUploadResult, reserveUpload, type UploadReservation } from "./sources/reserve-upload.js";
export { type SourceUploadPartRow, type SourceUploadRow, tenantReservations } from "./sources/upload-row.js";
export { SQLITE_FILE_NAME } from "./sqlite/open-sqlite-storage.js";
export {
  annotateTenantQueue,
  refreshTenantQueueAnnotation,
  TENANT_WAIT_PREFIX,
  tenantQueueBlock,
} from "./tenant-policy/annotate-tenant-queue.js";
export {
  readTenantConsumption,
  SLOT_HOLDING_STATUSES,
  type TenantConsumption,
} from "./tenant-policy/read-tenant-consumption.js";
export {
  readTenantControls,
  type StoredRateCard,
  type StoredTenantControls,
} from "./tenant-policy/read-tenant-controls.js";
export { readTenantSettings, type StoredTenantSettings } from "./tenant-policy/read-tenant-settings.js";
export { type TenantControlsChanges, writeTenantControls } from "./tenant-policy/write-tenant-controls.js";
export {
  type TenantSettingsChanges,
  type VersionedWriteResult,
  writeTenantSettings,
} from "./tenant-policy/write-tenant-settings.js";
export {
  type AddPersonToTenantInput,
  type AddPersonToTenantResult,
  addPersonToTenant,
} from "./tenants/add-person-to-tenant.js";
export { anyTenantExists } from "./tenants/any-tenant-exists.js";
export { createTenant } from "./tenants/create-tenant.js";
export { findMembership } from "./tenants/find-membership.js";
export { findPersonByEmail } from "./tenants/find-person-by-email.js";
export { findTenant } from "./tenants/find-tenant.js";
export { listMembershipsOfPerson } from "./tenants/list-memberships-of-person.js";
export type { Membership, Person, Tenant } from "./tenants/tenant.js";
export { formatTimestamp } from "./timestamps.js";
export { listMeteredAttempts, type MeteredAttemptRow } from "./usage/list-metered-attempts.js";
export { listUnplacedCancellations, type UnplacedCancellationRow } from "./usage/list-unplaced-cancellations.js";
export { listUploadedBytes, type UploadedBytesRow } from "./usage/list-uploaded-bytes.js";
