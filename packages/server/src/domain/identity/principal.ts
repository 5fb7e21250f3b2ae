import type { Role, Scope } from "@kiln/contract";

/** How a tenant caller authenticated. */
export type Via =
  | { readonly kind: "cli_token"; readonly tokenId: string }
  | { readonly kind: "agent_credential"; readonly name: string; readonly tokenHash: string }
  /** A dashboard session cookie (`kiln_session`). */
  | { readonly kind: "session"; readonly sessionId: string };

/** Who is calling a tenant operation, as established from a credential or session. */
export interface Principal {
  readonly kind: "person" | "agent";
  /** The id attributed on jobs, settings and audit: a user id, or `agent:<name>`. */
  readonly principal: string;
  readonly tenantId: string;
  readonly userId: string | null;
  readonly displayName: string;
  readonly role: Role | null;
  readonly scopes: readonly Scope[];
  readonly via: Via;
  /** Agent credentials only: the per-credential request limit. */
  readonly requestsPerMinute: number | null;
}

/** An operator with a live operator session. */
export interface OperatorPrincipal {
  readonly kind: "operator";
  readonly principal: string;
  readonly sessionId: string;
}
