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
