import { type Db, readTenantControls, readTenantSettings } from "@kiln/storage";
import type { Principal } from "../identity/principal.js";
import { refuse } from "../refusal.js";
import { admissionPolicyOf, type TenantAdmissionPolicy } from "./tenant-policy.js";

/**
 * What the tenant's policy decides at admission (jobs.submit, jobs.retry), read in the
 * submission's own transaction: a suspended tenant's submission is refused `conflict` naming
 * the suspension; an agent's, when the tenant's settings say agents may not submit,
 * `out_of_scope` naming `submit`; a size outside the tenant's allowed sizes `invalid_request`
 * naming body.size. Returns the policy snapshot the rest of admission reads (the tenant's ceiling,
 * its bandwidth allowance): the tenant's settings and controls are read once per submission.
 */
export async function admitTenantPolicy(
  db: Db,
  principal: Principal,
  input: { size: string; bodySize: boolean },
): Promise<TenantAdmissionPolicy> {
  const tenantId = principal.tenantId;
  const controls = await readTenantControls(db, { tenantId });
  if (controls?.suspended) {
    refuse(
      "conflict",
      `tenant ${tenantId} is suspended by the operator since ${controls.suspendedSince ?? "now"} (${controls.suspensionReason ?? "no reason given"}); new submissions are refused until it is lifted`,
    );
  }
  const policy = admissionPolicyOf(await readTenantSettings(db, { tenantId }), controls);
  if (principal.kind === "agent" && !policy.agentsMaySubmit) {
    refuse("out_of_scope", `tenant ${tenantId}'s settings do not let agents submit jobs (agents_may_submit is false)`, {
      scope: "submit",
    });
  }
  if (!policy.allowedSizes.includes(input.size)) {
    refuse(
      "invalid_request",
      `${input.bodySize ? "body.size" : "the job's size"} ${input.size} is not one of the tenant's allowed sizes (${policy.allowedSizes.join(", ")})`,
    );
  }
  return policy;
}
