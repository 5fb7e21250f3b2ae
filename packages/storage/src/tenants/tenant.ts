import type { MembershipRole, MembershipsTable, PersonsTable, TenantsTable } from "../schema.js";

export interface Tenant {
  id: string;
  displayName: string;
  createdAt: string;
}

export interface Person {
  id: string;
  email: string;
  displayName: string;
  createdAt: string;
}

export interface Membership {
  tenantId: string;
  personId: string;
  role: MembershipRole;
  organizationId: string;
  createdAt: string;
}

export function tenantFromRow(row: TenantsTable): Tenant {
  return { id: row.id, displayName: row.display_name, createdAt: row.created_at };
}

export function personFromRow(row: PersonsTable): Person {
  return { id: row.id, email: row.email, displayName: row.display_name, createdAt: row.created_at };
}

export function membershipFromRow(row: MembershipsTable): Membership {
  return {
    tenantId: row.tenant_id,
    personId: row.person_id,
    role: row.role,
    organizationId: row.organization_id,
    createdAt: row.created_at,
  };
}

/**
 * Emails are compared case-insensitively (nobody means two accounts by `Ann@x` and `ann@x`),
 * so they are stored trimmed and lower-cased and the unique index does the comparing.
 */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}
