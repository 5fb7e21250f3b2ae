import type { Operation } from "../operation.js";

/** Operator hosts, identities, placements, canaries, recovery, incidents. */
export const OPERATOR_HOSTS_OPERATIONS: Operation[] = [];
