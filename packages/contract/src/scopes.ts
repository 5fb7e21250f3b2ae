import { Type } from "@sinclair/typebox";

/** The credential scope enum of the spec, in its order. */
export const SCOPES = ["read", "submit", "settings", "credentials", "admin"] as const;
export type Scope = (typeof SCOPES)[number];

export const ROLES = ["owner", "admin", "member", "viewer"] as const;
export type Role = (typeof ROLES)[number];

/**
 * Scopes a person's role grants (spec, Authentication 2): read is the viewer role,
 * submit the member role, settings/credentials/admin belong to admin and owner.
 */
export const ROLE_SCOPES: Readonly<Record<Role, readonly Scope[]>> = {
  viewer: ["read"],
  member: ["read", "submit"],
  admin: ["read", "submit", "settings", "credentials", "admin"],
  owner: ["read", "submit", "settings", "credentials", "admin"],
};

/** The least role that holds a scope; named by `role_required` refusals. */
export const LEAST_ROLE_FOR_SCOPE: Readonly<Record<Scope, Role>> = {
  read: "viewer",
  submit: "member",
  settings: "admin",
  credentials: "admin",
  admin: "admin",
};

export const ScopeSchema = Type.Union(
  SCOPES.map((s) => Type.Literal(s)),
  { title: "Scope", description: "A credential scope: read, submit, settings, credentials or admin." },
);
