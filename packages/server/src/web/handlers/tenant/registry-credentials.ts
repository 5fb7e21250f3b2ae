import { appendAuditEntry, replaceRegistryCredential } from "@kiln/storage";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, principalOf } from "../../http/handler.js";

/**
 * tenant.registry_credential.replace: seals the tenant's new credential for one private
 * registry as its next version. Every host's dependency gateway uses it from the next attempt
 * (hosts fetch it per attempt, fenced by the attempt's lease, and never hold it longer); the
 * prior value is removed once every host has acknowledged the new version. The value is
 * never echoed, logged or audited.
 */
export const replaceTenantRegistryCredential: Handler<"tenant.registry_credential.replace"> = async (ctx) => {
  const principal = principalOf(ctx);
  const body = ctx.body;
  const registry = body.registry.toLowerCase();
  if (body.confirm.toLowerCase() !== registry) {
    refuse(
      "confirmation_required",
      `confirm must equal the registry (${registry}): the replacement applies to every host and removes the prior value once every host acknowledges`,
    );
  }
  const secrets = ctx.deps.secrets;
  if (secrets === undefined) throw new Error("no master key is configured: registry credentials cannot be sealed");
  const { version } = await replaceRegistryCredential(ctx.db, {
    tenantId: principal.tenantId,
    registry,
    ciphertext: secrets.seal(body.authorization),
    replacedBy: principal.principal,
    now: ctx.now,
  });
  await appendAuditEntry(
    ctx.db,
    {
      tenantId: principal.tenantId,
      actor: principal.principal,
      target: `registry-credential:${registry}`,
      value: `replaced with version ${version} (the value is never recorded)`,
      effective: "the next attempt on every host; the prior value is removed once every host acknowledges",
    },
    ctx.clock.now(),
  );
  return { registry, version, replaced_by: principal.principal };
};
