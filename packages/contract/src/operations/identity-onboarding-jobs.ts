import type { Operation } from "../operation.js";

/** Identity, onboarding, jobs (spec table of the same name). */
export const IDENTITY_ONBOARDING_JOBS_OPERATIONS: Operation[] = [];
