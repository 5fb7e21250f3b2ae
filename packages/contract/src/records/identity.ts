import { Type } from "@sinclair/typebox";
import { Closed, Nullable, RepositoryName } from "../schema-helpers.js";
import { ScopeSchema } from "../scopes.js";

export const Membership = Closed(
  "Membership",
  {
    tenant: Type.String({ description: "Tenant the person belongs to." }),
    organization_id: Type.String({ description: "The identity provider's organization id for that tenant." }),
    role: Type.String({ description: "The person's role in that tenant: owner, admin, member or viewer." }),
  },
  { description: "One tenant a person belongs to." },
);

export const Identity = Closed(
  "Identity",
  {
    principal: Type.String({
      description: "Principal attributed on jobs, settings writes and audit: the user id, or `agent:<name>`.",
    }),
    kind: Type.Union([Type.Literal("person"), Type.Literal("agent")]),
    user_id: Nullable(Type.String(), "The person's user id; null for an agent."),
    display_name: Type.String(),
    tenant: Type.String({ description: "The active tenant." }),
    role: Nullable(Type.String(), "The person's role in the active tenant; null for an agent."),
    scopes: Type.Array(ScopeSchema, { description: "Scopes the presented credential holds." }),
    memberships: Type.Array(Membership, { description: "Every tenant the person belongs to; empty for an agent." }),
    installation_active: Nullable(
      Type.Boolean(),
      "Whether a source-hosting app installation is claimed for the tenant; null when this runtime cannot claim one.",
    ),
    sign_out_available: Type.Boolean({ description: "Whether hosted sign-in (and so sign-out) is active." }),
  },
  { description: "Who the caller is: the principal, the active tenant and what the credential may do." },
);

export const FirstJob = Closed(
  "FirstJob",
  {
    id: Type.String({ description: "Job id of the tenant's newest job." }),
    repository: RepositoryName(),
  },
  { description: "The tenant's newest job, shown once the first job exists." },
);

export const Onboarding = Closed(
  "Onboarding",
  {
    installation_active: Nullable(
      Type.Boolean(),
      "Whether the tenant has claimed an app installation; null when this runtime cannot claim one.",
    ),
    install_url: Nullable(Type.String(), "Link that installs the source-hosting app; null when not offered."),
    claim_url: Nullable(Type.String(), "Provider-authorized route that claims an installation; null when not offered."),
    jobs_total: Type.Integer({ minimum: 0, description: "Jobs the tenant has submitted." }),
    first_job: Nullable(FirstJob, "The newest job; null before the first job."),
  },
  { description: "The tenant's onboarding state: installation, claim route and first job." },
);

export const ClaimRequest = Closed(
  "ClaimRequest",
  {
    installation_id: Type.Integer({ minimum: 1, description: "The provider's app installation id to claim." }),
  },
  { description: "Claims a source-hosting app installation for the active tenant." },
);

export const ClaimReceipt = Closed(
  "ClaimReceipt",
  {
    installation_id: Type.Integer({ minimum: 1 }),
    tenant: Type.String({ description: "The tenant that now holds the installation." }),
    claimed_by: Type.String({ description: "Principal that claimed it." }),
  },
  { description: "An installation claim as recorded." },
);

export const TenantId = Closed(
  "TenantId",
  {
    tenant: Type.String({ description: "The active tenant's id, as named on jobs and identities." }),
    display_name: Type.String({ description: "The tenant's human-readable name." }),
    principal: Type.String({ description: "The caller's principal: the user id, or `agent:<name>`." }),
    kind: Type.Union([Type.Literal("person"), Type.Literal("agent")], {
      description: "Whether the caller's credential is a person's device token or an agent credential.",
    }),
  },
  { description: "The tenant the presented credential acts for (what the CLI prints as its current tenant)." },
);
