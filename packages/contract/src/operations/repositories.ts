import type { Operation } from "../operation.js";

/** Repositories (spec table of the same name). */
export const REPOSITORIES_OPERATIONS: Operation[] = [];
