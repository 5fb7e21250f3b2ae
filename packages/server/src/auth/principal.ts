import type { Role, Scope } from "@kiln/contract";

/** Who is calling, as established from a credential or session. */
export interface Principal {
  readonly kind: "person" | "agent";
  /** The id attributed on jobs, settings and audit: a user id, or `agent:<name>`. */
  readonly principal: string;
  readonly tenantId: string;
  readonly userId: string | null;
  readonly displayName: string;
  readonly role: Role | null;
  readonly scopes: readonly Scope[];
  /** How the caller authenticated. */
  readonly via:
    | { readonly kind: "cli_token"; readonly tokenId: string }
    | { readonly kind: "agent_credential"; readonly name: string };
  /** Agent credentials only: the per-credential request limit. */
  readonly requestsPerMinute: number | null;
}
