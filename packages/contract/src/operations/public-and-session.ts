import type { Operation } from "../operation.js";

/** Public and session-only operations (spec table of the same name). */
export const PUBLIC_AND_SESSION_OPERATIONS: Operation[] = [];
