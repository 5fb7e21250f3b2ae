import type { Operation } from "../operation.js";

/** Sources: the streamed archive transport (spec table Sources). */
export const SOURCES_OPERATIONS: Operation[] = [];
