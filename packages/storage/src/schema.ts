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
  job_transitions: JobTransitionsTable;
  hosts: HostsTable;
  attempts: AttemptsTable;
  log_records: LogRecordsTable;
  job_events: JobEventsTable;
  artifacts: ArtifactsTable;
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
  host_enrollment_tokens: HostEnrollmentTokensTable;
  host_credentials: HostCredentialsTable;
  app_installations: AppInstallationsTable;
  installation_repositories: InstallationRepositoriesTable;
  check_runs: CheckRunsTable;
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
  /** JSON: [{path, sha256, bytes, executable}] — the exact source, bytes in the blob store. */
  source_manifest: string;
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

/** A host's credential for the HTTP host protocol (migration 0012); only its digest is kept. */
export interface HostCredentialsTable {
  token_hash: string;
  host_id: string;
  enrollment_token_hash: string;
  issued_at: string;
  revoked_at: string | null;
}

export interface HostsTable {
  id: string;
  vcpus: number;
  memory_bytes: number;
  isolation: string;
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
  sequence: Generated<number>;
  tenant_id: string;
  job_id: string;
  repository: string;
  status: string;
  previous_status: string | null;
  at: string;
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
  /** JSON: the manifest {entries, parts} as reserved. */
  manifest: string;
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
