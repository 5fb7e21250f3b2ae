import type { Generated } from "kysely";

/**
 * Kysely table types. Column names are the SQL names (snake_case); the verbs map rows to the
 * camelCase records they return. Every `*_at` / `reserved_until` / `expires_at` column holds
 * ISO-8601 UTC text with milliseconds (see `timestamps.ts`).
 */
export interface Database {
  tenants: TenantsTable;
  persons: PersonsTable;
  memberships: MembershipsTable;
  repositories: RepositoriesTable;
  idempotency_keys: IdempotencyKeysTable;
  audit_entries: AuditEntriesTable;
  operator_audit_entries: OperatorAuditEntriesTable;
  cli_tokens: CliTokensTable;
  agent_credentials: AgentCredentialsTable;
  sessions: SessionsTable;
  sign_in_links: SignInLinksTable;
  device_authorizations: DeviceAuthorizationsTable;
  rate_windows: RateWindowsTable;
  operator_credentials: OperatorCredentialsTable;
  jobs: JobsTable;
  job_manifests: JobManifestsTable;
  job_transitions: JobTransitionsTable;
  hosts: HostsTable;
  attempts: AttemptsTable;
  log_records: LogRecordsTable;
  job_events: JobEventsTable;
  job_event_counters: JobEventCountersTable;
  job_status_counts: JobStatusCountsTable;
  artifacts: ArtifactsTable;
  artifact_blobs: ArtifactBlobsTable;
  lineages: LineagesTable;
  repository_settings: RepositorySettingsTable;
  source_uploads: SourceUploadsTable;
  source_upload_parts: SourceUploadPartsTable;
  source_chunks: SourceChunksTable;
  advisory_dismissals: AdvisoryDismissalsTable;
  registry_credentials: RegistryCredentialsTable;
  registry_credential_acks: RegistryCredentialAcksTable;
  tenant_settings: TenantSettingsTable;
  tenant_controls: TenantControlsTable;
  usage_credits: UsageCreditsTable;
  inline_source_bytes: InlineSourceBytesTable;
  lineage_storage_samples: LineageStorageSamplesTable;
  host_enrollment_tokens: HostEnrollmentTokensTable;
  certificate_authorities: CertificateAuthoritiesTable;
  issued_certificates: IssuedCertificatesTable;
  host_health_reports: HostHealthReportsTable;
  host_operator_readiness: HostOperatorReadinessTable;
  host_activations: HostActivationsTable;
  host_incidents: HostIncidentsTable;
  host_incident_approvals: HostIncidentApprovalsTable;
  platform_anomalies: PlatformAnomaliesTable;
  host_recoveries: HostRecoveriesTable;
  host_recovery_steps: HostRecoveryStepsTable;
  host_transitions: HostTransitionsTable;
  host_initializations: HostInitializationsTable;
  host_receipts: HostReceiptsTable;
  host_reads: HostReadsTable;
  app_installations: AppInstallationsTable;
  installation_repositories: InstallationRepositoriesTable;
  check_runs: CheckRunsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  canaries: CanariesTable;
  tenant_anomalies: TenantAnomaliesTable;
  test_runs: TestRunsTable;
  test_outcomes: TestOutcomesTable;
}

/** A job. JSON columns hold the contract's shapes as text. */
export interface JobsTable {
  id: string;
  tenant_id: string;
  repository: string;
  branch: string;
  base_commit: string;
  head_sha: string | null;
  size: string;
  class: string;
  description: string;
  status: string;
  submitted_by: string;
  /** The idempotency key of the submission (null for retries, which have no key). */
  submission_key: string | null;
  request_hash: string;
  /** JSON: the CargoInvocation as submitted. */
  invocation: string;
  wall_clock_seconds: number;
  max_attempts: number;
  attempts_started: number;
  accepted_at: string;
  queued_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** JSON JobFailure or null. */
  failure: string | null;
  queue_annotation: string | null;
  retry_of: string | null;
  cancel_requested_at: string | null;
  cancel_requested_by: string | null;
  /** JSON: the admitted toolchain, origin and network policy. */
  admitted: string | null;
  /** JSON: metered usage once closed. */
  usage: string | null;
  /** JSON: the settlement once the terminal job settled (exactly once). */
  settlement: string | null;
  /** Migration 0015: the only host that may claim the job (a canary's); null for any host. */
  pinned_host: Generated<string | null>;
}

/**
 * A job's source manifest (migration 0042), out of its `jobs` row so that reading the job never
 * walks it; deleted with its job.
 */
export interface JobManifestsTable {
  job_id: string;
  /** JSON: [{path, sha256, bytes, executable, segments?} | {…, kind: "symlink", target}] — the exact source, bytes in the blob store. */
  manifest: string;
}

export interface JobTransitionsTable {
  job_id: string;
  position: number;
  from_status: string | null;
  to_status: string;
  at: string;
  reason: string;
}

/** A one-time token that enrolls one host (migration 0012); only its digest is kept. */
export interface HostEnrollmentTokensTable {
  token_hash: string;
  host_id: string;
  created_by: string;
  created_at: string;
  expires_at: string;
  redeemed_at: string | null;
}

/** The control plane's CA (migration 0023): its certificate and its key sealed under the master key. */
export interface CertificateAuthoritiesTable {
  id: string;
  certificate_pem: string;
  certificate_sha256: string;
  sealed_private_key: string;
  created_at: string;
}

/** Every certificate the CA issued (migration 0023): hosts' client and host listeners' server certificates. */
export interface IssuedCertificatesTable {
  serial: string;
  role: "host" | "listener";
  host_id: string | null;
  subject: string;
  /** A listener's names, as a JSON array; null for a host. */
  names: string | null;
  certificate_pem: string;
  certificate_sha256: string;
  /** A listener's key, sealed under the master key; null for a host (its key never leaves it). */
  sealed_private_key: string | null;
  issued_via: "enrollment" | "renewal" | "listener";
  enrollment_token_hash: string | null;
  renewed_from: string | null;
  not_before: string;
  not_after: string;
  issued_at: string;
  revoked_at: string | null;
}

export interface HostsTable {
  id: string;
  vcpus: number;
  memory_bytes: number;
  isolation: string;
  /** Migration 0043: why the host serves with that isolation; null before it was reported. */
  isolation_reason: string | null;
  /** Migration 0049: JSON array of the toolchain names the host admits; null where it advertised none. */
  toolchains: string | null;
  state: "serving" | "draining";
  enrolled_at: string;
  last_heartbeat_at: string | null;
  /** Migration 0013: moves with every recorded change (drain, undrain). */
  revision: Generated<number>;
  drained_by: string | null;
  drained_at: string | null;
  drain_reason: string | null;
  last_actor: string | null;
  last_action: string | null;
  last_at: string | null;
  last_reason: string | null;
  /** Migration 0016: admission closed by an impairment (apart from drain); null while open. */
  admission_closed_by: string | null;
  admission_closed_at: string | null;
  admission_closure_reason: string | null;
  /** Migration 0016: moves with every recovery, incident and admission change of the host. */
  operation_revision: Generated<number>;
  /** Migration 0016: 1 automatic, 0 not, null while no policy is set. */
  recovery_policy_automatic: number | null;
  recovery_policy_revision: Generated<number>;
  recovery_policy_changed_by: string | null;
  recovery_policy_changed_at: string | null;
  /** Migration 0018: the release an operator registered as deployed on the host. */
  deployed_release: string | null;
  deployed_release_sha256: string | null;
  deployed_at: string | null;
  /** Migration 0018: JSON array of the attempt ids the host last reported sandboxes for, and when. */
  reported_attempts: string | null;
  reported_at: string | null;
}

/** A recorded change of a host (migration 0018), newest by `sequence`. */
export interface HostTransitionsTable {
  sequence: Generated<number>;
  host_id: string;
  from_state: string;
  to_state: string;
  action: string;
  actor: string;
  at: string;
  reason: string | null;
  revision: number | null;
}

/** An operator-started host initialization and the step ledger its host reported (migration 0018). */
export interface HostInitializationsTable {
  operation: string;
  host_id: string;
  /** The host's 1st, 2nd, … initialization. */
  ordinal: number;
  state: "pending" | "running" | "succeeded" | "failed";
  /** JSON: the toolchain names to admit. */
  toolchains: string;
  started_by: string;
  started_at: string;
  finished_at: string | null;
  failure: string | null;
  /** JSON: the step ledger. */
  steps: string;
  note: string | null;
}

/** An operator's read of a host (journal, kernel log, evidence file) and its answer (migration 0018). */
export interface HostReadsTable {
  id: string;
  host_id: string;
  kind: string;
  path: string | null;
  max_bytes: number;
  /** evidence_export: the attempt whose retained files to include, and the most unit executions. */
  attempt: number | null;
  executions: number | null;
  requested_by: string;
  requested_at: string;
  state: "pending" | "answered" | "failed" | "delivered" | "expired";
  answered_at: string | null;
  /** base64 of the bytes the host answered, until the waiting request takes them. */
  content: string | null;
  /** 1 when bytes beyond max_bytes were left out. */
  truncated: number | null;
  detail: string | null;
  /** Why a failed read failed where a refusal names it: `not_found`, `conflict`. */
  refusal: string | null;
}

/** What a finished host operation recorded: deployment, initialization, reap (migration 0018). */
export interface HostReceiptsTable {
  sequence: Generated<number>;
  id: string;
  host_id: string;
  kind: string;
  job_id: string | null;
  vm_id: string | null;
  actor: string;
  at: string;
  summary: string;
  /** JSON: the receipt's entries ({kind, detail, at}). */
  entries: string;
}

/** One attempt of a job on a host, leased: only the holder of lease_token may report for it. */
export interface AttemptsTable {
  job_id: string;
  number: number;
  host_id: string;
  vcpus: number;
  lease_token: string;
  lease_expires_at: string;
  state: "running" | "finished" | "lost";
  started_at: string;
  finished_at: string | null;
  outcome: string | null;
  exit_code: number | null;
  /** JSON: the host's evidence for this attempt (phases, crates, tests, unit, usage). */
  report: string | null;
  cargo_output_sha256: string | null;
  cargo_output_bytes: number | null;
}

export interface LogRecordsTable {
  job_id: string;
  sequence: number;
  attempt: number;
  stream: "stdout" | "stderr" | "system";
  at: string;
  text: string;
}

export interface JobEventsTable {
  /** The row's platform-wide identity: never shown (it would count other tenants' moves). */
  id: Generated<number>;
  /**
   * The tenant's own sequence, numbered by the database (migration 0030's trigger, from
   * job_event_counters): the id cli.events sends and resumes from. Every committed event has one.
   */
  sequence: Generated<number>;
  tenant_id: string;
  job_id: string;
  repository: string;
  status: string;
  previous_status: string | null;
  at: string;
}

/** Each tenant's last job event sequence (migration 0030). */
export interface JobEventCountersTable {
  tenant_id: string;
  last_sequence: number;
}

/** A tenant's jobs in one status, kept by triggers on jobs (migration 0037); never written by a verb. */
export interface JobStatusCountsTable {
  tenant_id: string;
  status: string;
  jobs: number;
}

export interface ArtifactsTable {
  job_id: string;
  attempt: number;
  idx: number;
  path: string;
  bytes: number;
  sha256: string;
  published_at: string;
  expires_at: string;
  /** Migration 0044: 1 when the file had its owner's execute bit (a download keeps it), else 0. */
  executable: Generated<number>;
}

export type ArtifactBlobState = "held" | "shared" | "deleting" | "deleted";

/**
 * One digest ever published as an artifact (migration 0035): what publication, blob writers and
 * the retention sweep lock to agree on whether its bytes may be deleted (artifact-blobs/).
 */
export interface ArtifactBlobsTable {
  sha256: string;
  state: ArtifactBlobState;
  bytes: number;
  /** The last publication or put naming the digest; the sweep's grace period counts from it. */
  touched_at: string;
  /** While `deleting`: when the sweep holding `mark_token` marked it. */
  marked_at: string | null;
  mark_token: string | null;
  deleted_at: string | null;
}

/** A dashboard (`person`) or operator (`operator`) session; the cookie value is only hashed here. */
export interface SessionsTable {
  /** `ses_<random>`: a handle for logs and audit, never the cookie value. */
  id: string;
  token_hash: string;
  kind: "person" | "operator";
  tenant_id: string | null;
  person_id: string | null;
  created_at: string;
  expires_at: string;
  ended_at: string | null;
}

/** A one-time sign-in link: redeemed at most once, before it expires. */
export interface SignInLinksTable {
  token_hash: string;
  tenant_id: string;
  person_id: string;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

/**
 * An RFC 8628 device authorization. `pending` until a signed-in person approves it
 * (`approved`), then `redeemed` once its CLI token has been issued to the device.
 */
export interface DeviceAuthorizationsTable {
  device_code_hash: string;
  /** Normalized: upper case, no separator. */
  user_code: string;
  requesting_host: string;
  state: "pending" | "approved" | "redeemed";
  interval_seconds: number;
  created_at: string;
  expires_at: string;
  last_polled_at: string | null;
  approved_tenant_id: string | null;
  approved_by: string | null;
  approved_at: string | null;
  cli_token_id: string | null;
}

/** Requests counted per bucket (a credential, a client address) and fixed window. */
export interface RateWindowsTable {
  bucket: string;
  window_start: string;
  count: number;
}

/** The operator bootstrap credential: hashed to verify, encrypted so the admin CLI can show it again. */
export interface OperatorCredentialsTable {
  id: string;
  credential_hash: string;
  credential_ciphertext: string;
  created_at: string;
  retired_at: string | null;
}

/** A person's CLI device token. Only the SHA-256 of the value is stored. */
export interface CliTokensTable {
  /** `tok_<random>`: the public handle used to list and revoke. */
  id: string;
  tenant_id: string;
  person_id: string;
  token_hash: string;
  requesting_host: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  revoked_by: string | null;
}

/** An agent credential. Only the SHA-256 of the value is stored. */
export interface AgentCredentialsTable {
  /** Surrogate key; names are reused once a credential is no longer live. */
  id: Generated<number>;
  tenant_id: string;
  name: string;
  /**
   * The name while the credential is live, NULL once revoked or superseded after expiry:
   * a unique index on (tenant_id, live_name) makes "unique among live credentials" a
   * database guarantee rather than a check-then-insert race.
   */
  live_name: string | null;
  token_hash: string;
  /** JSON array of scopes. */
  scopes: string;
  created_by: string;
  created_at: string;
  expires_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  revoked_by: string | null;
  requests_per_minute: number;
}

export interface TenantsTable {
  /** A slug such as `acme`. */
  id: string;
  display_name: string;
  created_at: string;
}

export interface PersonsTable {
  /** `usr_<random>`. */
  id: string;
  /** Trimmed and lower-cased; unique. */
  email: string;
  display_name: string;
  created_at: string;
}

export const MEMBERSHIP_ROLES = ["owner", "admin", "member", "viewer"] as const;
export type MembershipRole = (typeof MEMBERSHIP_ROLES)[number];

export interface MembershipsTable {
  tenant_id: string;
  person_id: string;
  role: MembershipRole;
  /** The identity provider's organization; the tenant id where there is no provider. */
  organization_id: string;
  created_at: string;
}

export interface RepositoriesTable {
  tenant_id: string;
  /** `owner/name`. */
  name: string;
  onboarded_at: string;
  /** Principal that onboarded it. */
  onboarded_by: string;
}

export type IdempotencyKeyState = "in_flight" | "completed";

export interface IdempotencyKeysTable {
  tenant_id: string;
  key: string;
  operation: string;
  request_hash: string;
  state: IdempotencyKeyState;
  /** The current holder's token; kept after completion so a stale holder stays fenced out. */
  reservation_token: string;
  reserved_until: string;
  response_status: number | null;
  response_body: string | null;
  created_at: string;
  expires_at: string;
}

export interface AuditEntriesTable {
  /** Insertion order; the tie-breaker that makes "newest first" a total order. */
  sequence: Generated<number>;
  tenant_id: string;
  actor: string;
  target: string;
  value: string;
  changed_at: string;
  effective: string;
}

export interface OperatorAuditEntriesTable {
  sequence: Generated<number>;
  actor: string;
  target: string;
  value: string;
  changed_at: string;
  effective: string;
}

export type LineageState = "live" | "purged" | "evicted";

/** A tenant lineage as the control plane accounts for it (migration 0005). */
export interface LineagesTable {
  tenant_id: string;
  /** The host's lineage identity (`lin_…`), what a purge names. */
  lineage: string;
  repository: string;
  class: string;
  /** Bytes of its last save; only live lineages count against the quota. */
  bytes: number;
  last_used_at: string;
  /** The host holding it. */
  host: string;
  state: LineageState;
  /** Host-side generation of its last save (of the one dropped, while purged or evicted). */
  generation: number;
  state_changed_at: string;
  /** What its dependency builds were compiled with (migration 0047; lineages/find-lineage-seeds.ts); null: never a seed. */
  seed_context: string | null;
}

/** A repository's written settings (migration 0007); null values are the platform default. */
export interface RepositorySettingsTable {
  tenant_id: string;
  repository: string;
  /** The compare-and-set token a write names; moves by one per write. */
  version: number;
  /** Booleans as 0/1 (SQLite has no boolean type). */
  affected_tests: number | null;
  total_injection_opt_out: number | null;
  wall_clock_ceiling_seconds: number | null;
  /** Migration 0047; null: the default (on). */
  lineage_seeding: number | null;
  /** Migration 0048 (issue 37): re-runs of a failed test (0..5) and `pass` | `fail`. */
  flaky_retries: number | null;
  flaky_policy: string | null;
  changed_by: string;
  changed_at: string;
}

export type SourceUploadState = "reserved" | "verified" | "rejected";

/** A streamed source upload (migration 0006). JSON columns hold the contract's shapes as text. */
export interface SourceUploadsTable {
  tenant_id: string;
  /** The upload id: the reservation's idempotency key. */
  upload: string;
  repository: string;
  reserved_by: string;
  /** Hash of the reservation request; a replay with another hash is conflict. */
  request_hash: string;
  format_version: number;
  /** JSON: the manifest {entries, parts} as reserved; empty when `manifest_deflated` holds it. */
  manifest: string;
  /**
   * The manifest's JSON compressed by the server (server/src/domain/sources/manifest-codec.ts; migration
   * 0040); null in rows reserved before, whose `manifest` holds the text.
   */
  manifest_deflated: Uint8Array | null;
  manifest_sha256: string;
  /** JSON: the declared (and verified equal) totals. */
  totals: string;
  part_count: number;
  /** What the upload reserves against the tenant's limit while it counts. */
  part_bytes: number;
  state: SourceUploadState;
  reserved_at: string;
  expires_at: string;
  verified_at: string | null;
  completed_by: string | null;
  /** JSON {path, detail} when rejected. */
  rejection: string | null;
  claimed_job: string | null;
  claimed_at: string | null;
  /** When cleanup released an expired upload's parts; it stops counting then. */
  cleaned_at: string | null;
}

export interface SourceUploadPartsTable {
  tenant_id: string;
  upload: string;
  part: number;
  sha256: string;
  bytes: number;
  origin: "uploaded" | "reused";
  received_at: string;
}

/** The part digests a tenant holds: the per-tenant dedupe index. */
export interface SourceChunksTable {
  tenant_id: string;
  sha256: string;
  bytes: number;
  stored_at: string;
}

/** An advisory a principal dismissed (migration 0008); the advisory id changes with its measured basis. */
export interface AdvisoryDismissalsTable {
  tenant_id: string;
  /** `owner/name`. */
  repository: string;
  /** The advisory's id (repository + kind + basis signature, see the server's advisories/). */
  advisory: string;
  dismissed_by: string;
  dismissed_at: string;
}

/** One version of a tenant's credential for a private registry; the value sealed, null once removed. */
export interface RegistryCredentialsTable {
  tenant_id: string;
  registry: string;
  version: number;
  ciphertext: string | null;
  replaced_by: string;
  replaced_at: string;
  superseded_at: string | null;
  removed_at: string | null;
}

/** Per host and registry credential: the oldest version the host may still use. */
export interface RegistryCredentialAcksTable {
  tenant_id: string;
  registry: string;
  host_id: string;
  version: number;
  acknowledged_at: string;
}

/** A tenant's own settings (migration 0010); a null value is the platform default. */
export interface TenantSettingsTable {
  tenant_id: string;
  version: number;
  default_size: string | null;
  /** JSON array of sizes. */
  allowed_sizes: string | null;
  default_toolchain: string | null;
  wall_clock_ceiling_seconds: number | null;
  artifact_retention_days: number | null;
  log_retention_days: number | null;
  agents_may_submit: number | null;
  changed_by: string;
  changed_at: string;
}

/** A tenant's operator-set controls (migration 0010); a null limit is the platform default. */
export interface TenantControlsTable {
  tenant_id: string;
  version: number;
  max_running_jobs: number | null;
  storage_quota_bytes: number | null;
  bandwidth_bytes_per_month: number | null;
  /** JSON rate card or null. */
  rate_card: string | null;
  suspended: Generated<number>;
  suspension_reason: string | null;
  suspended_since: string | null;
  changed_by: string;
  changed_at: string;
}

/** A source-hosting app installation claimed by a tenant (migration 0011). */
/** A source-hosting webhook delivery kiln acted on (migration 0020). */
export interface WebhookDeliveriesTable {
  /** The provider's delivery id (`X-GitHub-Delivery`). */
  delivery_id: string;
  event: string;
  /** What kiln did with it, for an operator reading the table. */
  outcome: string;
  received_at: string;
  /** SHA-256 of the signed body, unique (migration 0043; null on rows recorded before it). */
  body_sha256: string | null;
}

export interface AppInstallationsTable {
  /** The provider's installation id, as decimal text. */
  installation_id: string;
  tenant_id: string;
  account: string;
  /** active | suspended | deleted */
  state: string;
  claimed_by: string;
  claimed_at: string;
  updated_at: string;
}

/** A repository (`owner/name`) an installation covers. */
export interface InstallationRepositoriesTable {
  installation_id: string;
  repository: string;
}

/** The durable state of a job's `kiln` check run on the provider. */
export interface CheckRunsTable {
  job_id: string;
  check_run_id: string | null;
  /** none | queued | in_progress | completed | abandoned */
  reported_stage: string;
  failures: number;
  last_error: string | null;
  next_attempt_at: string | null;
  lease_until: string | null;
  updated_at: string;
}

/** A canary the platform submitted to one host (migration 0015); its verdict is its job's. */
export interface CanariesTable {
  /** Also the job's submission key in the canary tenant. */
  id: string;
  tenant_id: string;
  host_id: string;
  /** The start of the canary slot it was due in; unique per host. */
  due_at: string;
  created_at: string;
  submitted_at: string | null;
  job_id: string | null;
  /** Why the public API refused the submission, when it did. */
  submission_error: string | null;
}

/** A tenant anomaly flag a rule raised (migration 0015), with the operator's disposition. */
export interface TenantAnomaliesTable {
  id: string;
  tenant_id: string;
  rule: string;
  /** What the rule saw (a job, a window); unique per rule and tenant. */
  subject: string;
  job_id: string | null;
  raised_at: string;
  /** JSON: the evidence items. */
  evidence: string;
  disposition: string | null;
  disposition_note: string | null;
  disposed_by: string | null;
  disposed_at: string | null;
}

/** The newest health report of a kiln-host (migration 0016). */
export interface HostHealthReportsTable {
  host_id: string;
  reported_at: string;
  disk_free_bytes: number;
  disk_total_bytes: number;
  failed_initialization_step: string | null;
}

/** The host operator's readiness as last recorded (migration 0016). */
export interface HostOperatorReadinessTable {
  host_id: string;
  instance: string;
  started_at: string;
  environment: string;
  host_reported: string;
  provisioning_bundle_sha256: string;
  recovery_binding_loaded: number;
  installation: string | null;
  provider_identity_readable: number;
  provider: string;
  provider_service_name: string;
  boot: string;
  boot_since: string;
  recorded_at: string;
}

/** One start of a host's host operator on a boot, with its plan, ledger and receipt (migration 0021). */
export interface HostActivationsTable {
  operation: string;
  host_id: string;
  boot: string;
  instance: string;
  started_at: string;
  /** JSON: the step names, in order. */
  plan: string;
  /** JSON: each step's state, instants and detail (`HostActivationStepRecord[]`). */
  ledger: string;
  outcome: string | null;
  finished_at: string | null;
  receipt_detail: string | null;
  written_at: string;
}

/** A host incident, opened on an impairment (migration 0016). */
export interface HostIncidentsTable {
  id: string;
  host_id: string;
  state: "open" | "closed";
  revision: Generated<number>;
  opened_at: string;
  closed_at: string | null;
  closed_by: string | null;
  automatic_recoveries_spent: Generated<number>;
  awaiting_operator: Generated<number>;
  awaiting_reason: string | null;
}

/** An approval of one destructive step for one incident (migration 0016). */
export interface HostIncidentApprovalsTable {
  incident_id: string;
  step: string;
  host_id: string;
  approved_by: string;
  approved_at: string;
}

/** A platform anomaly the impairment detector raised (migration 0016). */
export interface PlatformAnomaliesTable {
  id: string;
  host_id: string;
  kind: string;
  /** JSON: the evidence items. */
  evidence: string;
  raised_at: string;
  incident_id: string;
  disposition: string | null;
  disposition_note: string | null;
  disposed_by: string | null;
  disposed_at: string | null;
}

/** A recovery operation of a host (migration 0016): `recorded` → `running` → `succeeded` | `failed`. */
export interface HostRecoveriesTable {
  id: string;
  host_id: string;
  incident_id: string | null;
  request: string;
  surface: string;
  operator: string;
  rescue_read: number;
  rescue_ssh_public_key: string | null;
  state: "recorded" | "running" | "succeeded" | "failed";
  invoked_at: string;
  /** The host operator instance running it, once claimed. */
  holder: string | null;
  claimed_at: string | null;
  finished_at: string | null;
  outcome_detail: string | null;
}

/** One step of a recovery's ledger (migration 0016), in run order. */
export interface HostRecoveryStepsTable {
  recovery_id: string;
  position: number;
  step: string;
  destructive: number;
  state: "pending" | "awaiting_approval" | "running" | "succeeded" | "failed" | "skipped";
  started_at: string | null;
  finished_at: string | null;
  detail: string | null;
}

/** An operator's credit to a tenant's usage (migration 0019). */
/**
 * The source bytes a job submitted inline (schema_version 1) carried (migration 0022): counted
 * toward the tenant's bandwidth and usage's bytes uploaded like an uploaded part's.
 */
export interface InlineSourceBytesTable {
  job_id: string;
  tenant_id: string;
  repository: string;
  submitted_by: string;
  bytes: number;
  received_at: string;
}

export interface UsageCreditsTable {
  id: string;
  tenant_id: string;
  granted_at: string;
  /** Credited vCPU-seconds (positive; the ledger shows it negated). */
  vcpu_seconds: number;
  /** Credited US cents (positive; the ledger shows it negated). */
  amount_cents: number;
  job: string | null;
  reason: string;
  granted_by: string;
}

/** Bytes a tenant's live lineages of one repository held at one UTC hour (migration 0019). */
export interface LineageStorageSamplesTable {
  tenant_id: string;
  repository: string;
  /** `YYYY-MM-DDTHH` (UTC). */
  hour: string;
  bytes: number;
}

/** A job whose finished attempt reported tests (migration 0046): the unit of a history window. */
export interface TestRunsTable {
  job_id: string;
  tenant_id: string;
  repository: string;
  attempt: number;
  finished_at: string;
  /** Tests the attempt reported. */
  tests: number;
  /** Tests kept in test_outcomes (at most MAX_RECORDED_TESTS_PER_JOB). */
  recorded: number;
}

/** How one test ended in one job (passed, failed, flaky, ignored), for repositories.tests. */
export interface TestOutcomesTable {
  job_id: string;
  target: string;
  name: string;
  tenant_id: string;
  repository: string;
  attempt: number;
  outcome: "passed" | "failed" | "flaky" | "ignored";
  duration_ms: number | null;
  finished_at: string;
}
