import { CANARY_TENANT, DEFAULT_DOGFOOD_TENANT } from "../platform/platform-tenants.js";

/** The two tenants the dogfood trial reads: its own (shadow and head records) and the canaries' (probes). */
export interface TrialTenants {
  readonly dogfood: string;
  readonly probe: string;
}

export function trialTenantsOf(deps: { readonly dogfoodTenant?: string | undefined }): TrialTenants {
  return { dogfood: deps.dogfoodTenant ?? DEFAULT_DOGFOOD_TENANT, probe: CANARY_TENANT };
}
