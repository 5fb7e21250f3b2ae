import type { Operation } from "../operation.js";

/** The three deprecated predecessor submission routes. */
export const PREDECESSOR_SUBMISSION_OPERATIONS: Operation[] = [];
