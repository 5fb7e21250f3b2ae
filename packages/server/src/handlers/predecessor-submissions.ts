import { refuse } from "../http/refusal.js";
import type { Handler } from "./handler.js";

/** The retained predecessor routes: refused, naming the captured Cargo workspace submission. */
export const refusePredecessorSubmission: Handler = async ({ op }) =>
  refuse(
    "legacy_unsupported",
    `${op.method} ${op.path} is a retired predecessor form; submit a captured Cargo workspace with POST /api/v4/jobs (jobs.submit)`,
  );
