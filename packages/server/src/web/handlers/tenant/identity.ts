import { findTenant, listMembershipsOfPerson } from "@kiln/storage";
import { type Handler, principalOf } from "../../http/handler.js";
import { installationActive } from "./onboarding.js";

/** identity.current: the closed Identity record for a person or an agent. */
export const currentIdentity: Handler<"identity.current"> = async (ctx) => {
  const p = principalOf(ctx);
  const memberships =
    p.userId === null
      ? []
      : (await listMembershipsOfPerson(ctx.db, p.userId)).map((m) => ({
          tenant: m.tenantId,
          organization_id: m.organizationId,
          role: m.role,
        }));
  return {
    principal: p.principal,
    kind: p.kind,
    user_id: p.userId,
    display_name: p.displayName,
    tenant: p.tenantId,
    role: p.role,
    scopes: [...p.scopes],
    memberships,
    // null when no source-hosting app is configured (nothing can be claimed).
    installation_active: await installationActive(ctx.deps, ctx.db, p.tenantId),
    // People sign out of dashboard sessions; agents have no session to end.
    sign_out_available: p.kind === "person",
  };
};

/** cli.tenant: the active tenant and who is acting in it. */
export const cliTenant: Handler<"cli.tenant"> = async (ctx) => {
  const p = principalOf(ctx);
  const tenant = await findTenant(ctx.db, p.tenantId);
  return { tenant: p.tenantId, display_name: tenant?.displayName ?? p.tenantId, principal: p.principal, kind: p.kind };
};
