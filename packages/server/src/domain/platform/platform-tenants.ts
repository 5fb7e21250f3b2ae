/**
 * Tenants the platform itself runs work in. Canaries (issue 18) are ordinary jobs the platform
 * submits through the public API in CANARY_TENANT, so every canary is a job with attempts,
 * logs and evidence like any other; the dogfood trial (issue 19) reads them as its `probe:`
 * run records and reads the jobs of the dogfood tenant as its `shadow:` and `head:` records.
 */
export const CANARY_TENANT = "kiln-canary";

/** KILN_DOGFOOD_TENANT names the tenant whose jobs the dogfood trial observes. */
export const DEFAULT_DOGFOOD_TENANT = "kiln-dogfood";
