import type { Operation } from "./operation.js";
import { IDENTITY_ONBOARDING_JOBS_OPERATIONS } from "./operations/identity-onboarding-jobs.js";
import { OPERATOR_AUDIT_OPERATIONS } from "./operations/operator-audit.js";
import { OPERATOR_DOGFOOD_OPERATIONS } from "./operations/operator-dogfood.js";
import { OPERATOR_HOSTS_OPERATIONS } from "./operations/operator-hosts.js";
import { OPERATOR_SESSION_TENANTS_ANOMALIES_OPERATIONS } from "./operations/operator-session-tenants-anomalies.js";
import { PREDECESSOR_SUBMISSION_OPERATIONS } from "./operations/predecessor-submissions.js";
import { PUBLIC_AND_SESSION_OPERATIONS } from "./operations/public-and-session.js";
import { REPOSITORIES_OPERATIONS } from "./operations/repositories.js";
import { SOURCES_OPERATIONS } from "./operations/sources.js";
import { TENANT_OPERATIONS } from "./operations/tenant.js";

/**
 * The operation catalogue: every operation defined once. Routes, validation, the
 * OpenAPI document, the typed client, MCP tools and docs are all derived from it.
 */
const ENTRIES = [
  ...SOURCES_OPERATIONS,
  ...PUBLIC_AND_SESSION_OPERATIONS,
  ...IDENTITY_ONBOARDING_JOBS_OPERATIONS,
  ...PREDECESSOR_SUBMISSION_OPERATIONS,
  ...REPOSITORIES_OPERATIONS,
  ...TENANT_OPERATIONS,
  ...OPERATOR_SESSION_TENANTS_ANOMALIES_OPERATIONS,
  ...OPERATOR_DOGFOOD_OPERATIONS,
  ...OPERATOR_HOSTS_OPERATIONS,
  ...OPERATOR_AUDIT_OPERATIONS,
] as const satisfies readonly Operation[];

export const CATALOGUE: readonly Operation[] = ENTRIES;

/** One catalogue entry with its literal types (the typed client derives from these). */
export type CatalogueEntry = (typeof ENTRIES)[number];
/** Every operation id of the catalogue, as a type. */
export type OperationId = CatalogueEntry["id"];

const BY_ID = new Map<string, Operation>(CATALOGUE.map((op) => [op.id, op]));

export function operationById(id: string): Operation {
  const op = BY_ID.get(id);
  if (op === undefined) throw new Error(`no operation ${id} in the catalogue`);
  return op;
}
