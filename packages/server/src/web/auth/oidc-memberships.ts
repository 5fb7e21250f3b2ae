import { ROLES, type Role } from "@kiln/contract";

/** Roles from most to least privileged: when several groups name one tenant, the first wins. */
const RANK: readonly Role[] = ROLES;

/** A tenant membership an identity provider's groups claim grants. */
export interface GrantedMembership {
  readonly tenantId: string;
  readonly role: Role;
  /** The claim value that granted it (kept as the membership's organization). */
  readonly group: string;
}

const GROUP = /^kiln:([A-Za-z0-9][A-Za-z0-9._-]{0,63}):([a-z]+)$/;

/**
 * The mapping rule (README, Signing in): every value of the groups claim (a string or an array
 * of strings) of the form `kiln:<tenant>:<role>`, role one of owner, admin, member, viewer,
 * grants that role in that tenant; other values are ignored (an IdP's groups serve many
 * applications). Several values naming one tenant grant the most privileged of their roles.
 * Tenants are never created from a claim: the caller keeps only tenants that exist.
 */
export function membershipsFromGroups(claim: unknown): GrantedMembership[] {
  const values = typeof claim === "string" ? [claim] : Array.isArray(claim) ? claim : [];
  const granted = new Map<string, GrantedMembership>();
  for (const value of values) {
    if (typeof value !== "string") continue;
    const match = GROUP.exec(value.trim());
    const tenantId = match?.[1];
    const role = RANK.find((r) => r === match?.[2]);
    if (tenantId === undefined || role === undefined) continue;
    const held = granted.get(tenantId);
    if (held === undefined || RANK.indexOf(role) < RANK.indexOf(held.role)) {
      granted.set(tenantId, { tenantId, role, group: value.trim() });
    }
  }
  return [...granted.values()].sort((a, b) => (a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : 0));
}
