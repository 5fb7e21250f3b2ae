import type { Operation } from "../operation.js";

/** Operator dogfood trial operations. */
export const OPERATOR_DOGFOOD_OPERATIONS: Operation[] = [];
