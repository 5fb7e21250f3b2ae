import type { Operation } from "../operation.js";

/** Operator session, tenant controls, anomalies, platform states. */
export const OPERATOR_SESSION_TENANTS_ANOMALIES_OPERATIONS: Operation[] = [];
