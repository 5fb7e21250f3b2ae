export type { Kysely } from "kysely";
export { dismissAdvisory } from "./advisories/dismiss-advisory.js";
export { type AdvisoryDismissal, listDismissals } from "./advisories/list-dismissals.js";
export {
  ARTIFACT_BLOB_GRACE_SECONDS,
  ARTIFACT_BLOB_MARK_LEASE_SECONDS,
} from "./artifact-blobs/artifact-blob-timing.js";
export { clearBlobForPut, type PutClearance, type PutTicket } from "./artifact-blobs/clear-blob-for-put.js";
export { confirmBlobPut } from "./artifact-blobs/confirm-blob-put.js";
export { recordPublishedBlobs } from "./artifact-blobs/record-published-blobs.js";
export { type ArtifactBlobSweep, sweepArtifactBlobs } from "./artifact-blobs/sweep-artifact-blobs.js";
export { appendAuditEntry } from "./audit/append-audit-entry.js";
export { appendOperatorAuditEntry } from "./audit/append-operator-audit-entry.js";
export type { AppendAuditEntryInput, AuditEntry, AuditPage } from "./audit/audit-entry.js";
export { operatorAuditEntryExists } from "./audit/find-operator-audit-entry.js";
export { listAuditEntries } from "./audit/list-audit-entries.js";
export { listOperatorAuditEntries } from "./audit/list-operator-audit-entries.js";
export {
  BlobNotFoundError,
  type BlobReadStream,
  type BlobStore,
  isBlobNotFound,
  type StoredBlob,
} from "./blobs/blob-store.js";
export { LocalBlobStore } from "./blobs/local-blob-store.js";
export { S3BlobStore, type S3BlobStoreOptions } from "./blobs/s3-blob-store.js";
export { parseS3BlobUrl, type S3BlobLocation } from "./blobs/s3-blob-url.js";
export {
  discardStagedBlob,
  removeStaleStagedBlobs,
  type StagedBlob,
  StagedBlobTooLargeError,
  stageBlob,
} from "./blobs/staged-blob.js";
export { SweepFencedBlobStore } from "./blobs/sweep-fenced-blob-store.js";
export type { CanaryRecord } from "./canaries/canary-record.js";
export { findCanaryByJob } from "./canaries/find-canary-by-job.js";
export { listCanaryOutcomes } from "./canaries/list-canary-outcomes.js";
export { recordCanarySubmission } from "./canaries/record-canary-submission.js";
export { reserveCanary } from "./canaries/reserve-canary.js";
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
export { declareDogfoodMaintenance } from "./dogfood/declare-dogfood-maintenance.js";
export type {
  DogfoodGateEvidenceRow,
  DogfoodGateOpeningRow,
  DogfoodIncidentRow,
  DogfoodInterventionRow,
  DogfoodLifecycleChangeRow,
  DogfoodMaintenanceRow,
  DogfoodSpendRow,
} from "./dogfood/dogfood-tables.js";
export { listDogfoodGateEvidence } from "./dogfood/list-dogfood-gate-evidence.js";
export { listDogfoodIncidents } from "./dogfood/list-dogfood-incidents.js";
export { listDogfoodInterventions } from "./dogfood/list-dogfood-interventions.js";
export { listDogfoodLifecycleChanges } from "./dogfood/list-dogfood-lifecycle-changes.js";
export { listDogfoodMaintenance } from "./dogfood/list-dogfood-maintenance.js";
export { listDogfoodSpend } from "./dogfood/list-dogfood-spend.js";
export {
  listTrialLedger,
  type TrialAttemptRow,
  type TrialJobRow,
  type TrialLedger,
  type TrialSettlementRow,
} from "./dogfood/list-trial-ledger.js";
export { listTrialProbeReservations } from "./dogfood/list-trial-probe-reservations.js";
export { openDogfoodGate } from "./dogfood/open-dogfood-gate.js";
export { readDogfoodGateOpening } from "./dogfood/read-dogfood-gate-opening.js";
export { readDogfoodIncident } from "./dogfood/read-dogfood-incident.js";
export { recordDogfoodGateEvidence } from "./dogfood/record-dogfood-gate-evidence.js";
export { recordDogfoodIncident } from "./dogfood/record-dogfood-incident.js";
export { recordDogfoodIncidentIssue } from "./dogfood/record-dogfood-incident-issue.js";
export { recordDogfoodIntervention } from "./dogfood/record-dogfood-intervention.js";
export { recordDogfoodLifecycleChange } from "./dogfood/record-dogfood-lifecycle-change.js";
export { recordDogfoodSpend } from "./dogfood/record-dogfood-spend.js";
export { resolveDogfoodIncident } from "./dogfood/resolve-dogfood-incident.js";
export { InvalidCursorError, UnknownTenantError } from "./errors.js";
export { type Db, executorOf, inTransaction, type StorageOrTransaction } from "./executor.js";
export { approveDestructiveStep, type DestructiveApprovalResult } from "./host-incidents/approve-destructive-step.js";
export { closeHostIncident, type HostIncidentCloseResult } from "./host-incidents/close-host-incident.js";
export type { HostIncidentRecord } from "./host-incidents/host-incident-records.js";
export { markHostIncidentAwaiting } from "./host-incidents/mark-host-incident-awaiting.js";
export {
  AUTOMATIC_RECOVERY_OFF_REASON,
  type ImpairmentEvidence,
  type ImpairmentRaised,
  raiseHostImpairment,
} from "./host-incidents/raise-host-impairment.js";
export { readHostIncident, readOpenHostIncident } from "./host-incidents/read-host-incident.js";
export {
  awaitingApprovalReason,
  beginHostRecoveryStep,
  type StepBeginAnswer,
} from "./host-recovery/begin-host-recovery-step.js";
export { claimHostRecovery } from "./host-recovery/claim-host-recovery.js";
export { endHostRecoveryStep } from "./host-recovery/end-host-recovery-step.js";
export { finishHostRecovery } from "./host-recovery/finish-host-recovery.js";
export {
  HOST_ACTIVATION_PLAN,
  type HostActivationRecord,
  type HostActivationStepRecord,
  hostActivationOperationOf,
} from "./host-recovery/host-activation-records.js";
export {
  DESTRUCTIVE_RECOVERY_STEPS,
  type HostRecoveryRecord,
  type HostRecoveryStepRecord,
  OPEN_RECOVERY_STATES,
} from "./host-recovery/host-recovery-records.js";
export {
  type HostRecoveryInvocationInput,
  type HostRecoveryInvocationResult,
  invokeHostRecovery,
} from "./host-recovery/invoke-host-recovery.js";
export { HOST_ACTIVATIONS_LISTED, listHostActivations } from "./host-recovery/list-host-activations.js";
export { listHostRecoveries } from "./host-recovery/list-host-recoveries.js";
export { readHostLiveLease } from "./host-recovery/read-host-live-lease.js";
export {
  type HostOperationState,
  type HostOperatorReadinessRecord,
  readHostOperationState,
} from "./host-recovery/read-host-operation-state.js";
export { recordHostActivation } from "./host-recovery/record-host-activation.js";
export { readHostHealthReport, recordHostHealthReport } from "./host-recovery/record-host-health-report.js";
export { recordHostOperatorReadiness } from "./host-recovery/record-host-operator-readiness.js";
export { recordHostRecoveryPlan } from "./host-recovery/record-host-recovery-plan.js";
export { reopenHostAdmission } from "./host-recovery/reopen-host-admission.js";
export { type HostRecoveryPolicyChange, setHostRecoveryPolicy } from "./host-recovery/set-host-recovery-policy.js";
export { answerHostRead } from "./hosts/answer-host-read.js";
export {
  type CertificateAuthorityRecord,
  ensureCertificateAuthority,
  readCertificateAuthority,
} from "./hosts/certificate-authority.js";
export { createHostEnrollmentToken } from "./hosts/create-host-enrollment-token.js";
export { type EnrolledHostOffers, enrolledHostOffers } from "./hosts/enrolled-host-offers.js";
export { findAttemptHost } from "./hosts/find-attempt-host.js";
export { findHostEnrollmentToken } from "./hosts/find-host-enrollment-token.js";
export { findIssuedCertificate } from "./hosts/find-issued-certificate.js";
export {
  drainHost,
  type HostRecord,
  type HostStateChange,
  listHostRecords,
  readHostRecord,
  undrainHost,
} from "./hosts/host-drain.js";
export type { HostInitializationRecord, InitializationLedgerStep } from "./hosts/host-initialization-record.js";
export type { IssuedCertificateInput, IssuedCertificateRecord } from "./hosts/issued-certificate-record.js";
export { type HostIdentityRecords, listHostIdentityRecords } from "./hosts/list-host-identity-records.js";
export { type HostReceiptRecord, listHostReceipts } from "./hosts/list-host-receipts.js";
export { type HostTransitionRecord, listHostTransitions } from "./hosts/list-host-transitions.js";
export { type HostSandboxReport, type LivePlacementRecord, listLivePlacements } from "./hosts/list-live-placements.js";
export { findListenerCertificate, recordIssuedCertificate } from "./hosts/listener-certificates.js";
export { readHostAdmission } from "./hosts/read-host-admission.js";
export { type HostCapacityObservation, readHostCapacity } from "./hosts/read-host-capacity.js";
export { readHostInitialization } from "./hosts/read-host-initialization.js";
export { readReapReceipt } from "./hosts/read-reap-receipt.js";
export { recordHostFleetPoll } from "./hosts/record-host-fleet-poll.js";
export { type HostReceiptEntry, recordHostReceipt } from "./hosts/record-host-receipt.js";
export { type EnrollmentRedemption, redeemHostEnrollmentToken } from "./hosts/redeem-host-enrollment-token.js";
export { registerHostDeployment } from "./hosts/register-host-deployment.js";
export { type CertificateRenewal, renewHostCertificate } from "./hosts/renew-host-certificate.js";
export { reportHostInitialization } from "./hosts/report-host-initialization.js";
export { requestHostRead } from "./hosts/request-host-read.js";
export { requeueStalePlacement, type StalePlacementRequeue } from "./hosts/requeue-stale-placement.js";
export { revokeHostCertificates } from "./hosts/revoke-host-certificates.js";
export { type HostInitializationStart, startHostInitialization } from "./hosts/start-host-initialization.js";
export { type HostReadAnswerState, takeHostReadAnswer } from "./hosts/take-host-read-answer.js";
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
export { type AttemptRow, claimNextJob, HOST_SEEN_EVERY_SECONDS, type LineageAffinity } from "./jobs/claim-next-job.js";
export { findJobBySubmissionKey } from "./jobs/find-job-by-submission-key.js";
export { findLeasedAttempt } from "./jobs/find-leased-attempt.js";
export {
  type AttemptCompletion,
  type AttemptUsage,
  finishAttempt,
  type MeteredAttempt,
} from "./jobs/finish-attempt.js";
export { insertJob, type JobRow, type NewJob } from "./jobs/insert-job.js";
export { newJobId } from "./jobs/job-ids.js";
export { type NewJobManifest, readJobManifest } from "./jobs/job-manifests.js";
export { JOB_LIST_COLUMNS, type JobFilters, type JobListRow, listJobs } from "./jobs/list-jobs.js";
export { type AttemptReportRow, listRecentAttemptReports } from "./jobs/list-recent-attempt-reports.js";
export { type AttemptLogPlace, locateAttemptLogLines } from "./jobs/locate-attempt-log-lines.js";
export { type JobListRecord, type JobRecord, readJob, readJobDocument, readJobRecords } from "./jobs/read-job.js";
export { type JobEventRow, latestJobEventSequence, readJobEvents } from "./jobs/read-job-events.js";
export { readJobStatus } from "./jobs/read-job-status.js";
export { decodeLogCursor, encodeLogCursor, readLogRecords } from "./jobs/read-log-page.js";
export { reclaimExpiredLeases } from "./jobs/reclaim-expired-leases.js";
export { recordTransition } from "./jobs/record-transition.js";
export { registerHost } from "./jobs/register-host.js";
export { releaseUndeliveredAttempt, type UndeliveredRelease } from "./jobs/release-undelivered-attempt.js";
export { type LeaseRenewal, renewAttemptLease } from "./jobs/renew-attempt-lease.js";
export { type CancellationResult, requestCancellation } from "./jobs/request-cancellation.js";
export { findLineageDrop, type LineageDrop } from "./lineages/find-lineage-drop.js";
export { findLineageSeeds, type LineageSeed, MAX_LINEAGE_SEEDS } from "./lineages/find-lineage-seeds.js";
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
export { type MigrationState, readMigrationState } from "./migrations/read-migration-state.js";
export {
  hostPlacementSubject,
  JOB_CHANNELS,
  type JobChannel,
  tenantPlacementSubject,
} from "./notifications/job-notices.js";
export {
  type JobNotificationEvent,
  type JobNotifications,
  type JobNotificationsOptions,
  LISTEN_RETRY_MS,
  startJobNotifications,
  type Wake,
} from "./notifications/job-notifications.js";
export type { NoticeConnection, NoticeHandlers } from "./notifications/notice-connection.js";
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
export { disposePlatformAnomaly } from "./platform-anomalies/dispose-platform-anomaly.js";
export { listPlatformAnomalies, type PlatformAnomalyRecord } from "./platform-anomalies/list-platform-anomalies.js";
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
export { changeInstallationRepositories } from "./source-hosting/change-installation-repositories.js";
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
export { readInstallation } from "./source-hosting/read-installation.js";
export {
  readWebhookDelivery,
  recordWebhookDelivery,
  settleWebhookDelivery,
} from "./source-hosting/record-webhook-delivery.js";
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
  type StoredUploadManifest,
} from "./sources/read-upload.js";
export {
  findTenantChunk,
  type RecordUploadPartResult,
  recordUploadPart,
  type UploadPart,
} from "./sources/record-upload-part.js";
export { type ReserveUploadResult, reserveUpload, type UploadReservation } from "./sources/reserve-upload.js";
export {
  SOURCE_UPLOAD_HEADER_COLUMNS,
  type SourceUploadHeader,
  type SourceUploadPartRow,
  type SourceUploadRow,
  tenantReservations,
} from "./sources/upload-row.js";
export { SQLITE_FILE_NAME } from "./sqlite/open-sqlite-storage.js";
export { countSubmissionsByTenant } from "./tenant-anomalies/count-submissions-by-tenant.js";
export { disposeTenantAnomaly } from "./tenant-anomalies/dispose-tenant-anomaly.js";
export {
  type FinishedAttemptMeasurement,
  listFinishedAttemptMeasurements,
} from "./tenant-anomalies/list-finished-attempt-measurements.js";
export { listTenantAnomalies } from "./tenant-anomalies/list-tenant-anomalies.js";
export { raiseTenantAnomaly } from "./tenant-anomalies/raise-tenant-anomaly.js";
export type { TenantAnomalyRecord } from "./tenant-anomalies/tenant-anomaly-record.js";
export { annotateQueuedJob } from "./tenant-policy/annotate-queued-job.js";
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
export {
  type TenantControlsChanges,
  type UsageCredit,
  writeTenantControls,
} from "./tenant-policy/write-tenant-controls.js";
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
export { type ListedTenant, listTenants } from "./tenants/list-tenants.js";
export { namesOfPeople, type PersonName } from "./tenants/names-of-people.js";
export type { Membership, Person, Tenant } from "./tenants/tenant.js";
export {
  listTestHistory,
  type TestHistoryGroup,
  type TestHistoryPageRows,
  type TestHistoryQuery,
  type TestHistoryRun,
  type TestHistorySort,
} from "./test-history/list-test-history.js";
export { MAX_RECORDED_TESTS_PER_JOB } from "./test-history/record-test-outcomes.js";
export { formatTimestamp } from "./timestamps.js";
export { countMeteredJobs, type MeteredJobCounts } from "./usage/count-metered-jobs.js";
export { listMeteredAttempts, type MeteredAttemptRow } from "./usage/list-metered-attempts.js";
export { listStorageByteHours, type StorageByteHoursRow } from "./usage/list-storage-byte-hours.js";
export { listUnplacedCancellations, type UnplacedCancellationRow } from "./usage/list-unplaced-cancellations.js";
export { listUploadedBytes, type UploadedBytesRow } from "./usage/list-uploaded-bytes.js";
export { listUsageCredits, type UsageCreditRow } from "./usage/list-usage-credits.js";
export { recordInlineSourceBytes } from "./usage/record-inline-source-bytes.js";
export { sampleLineageStorage } from "./usage/sample-lineage-storage.js";
export { sumUploadedBytes } from "./usage/sum-uploaded-bytes.js";
