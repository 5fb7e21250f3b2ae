import type { Operation } from "../operation.js";

/** Operator audit. */
export const OPERATOR_AUDIT_OPERATIONS: Operation[] = [];
