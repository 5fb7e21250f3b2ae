import { defineOperation } from "../operation.js";
import { JobId, LocalDiffRequest } from "../records/jobs.js";
import { A } from "../refusal-codes.js";

const predecessor = <const V extends 1 | 2 | 3, const P extends string>(version: V, path: P) =>
  defineOperation({
    id: `jobs.submit_predecessor_v${version}` as `jobs.submit_predecessor_v${V}`,
    method: "POST",
    path,
    summary: "Deprecated predecessor submission; refused legacy_unsupported. Use jobs.submit (POST /api/v4/jobs).",
    description:
      "Retained but deprecated: the attempt runtime refuses it with legacy_unsupported naming the captured Cargo workspace submission. New clients do not call it.",
    tag: "jobs",
    security: { kind: "tenant", scope: "submit" },
    request: { body: { encoding: "json", schema: LocalDiffRequest } },
    response: { encoding: "json", schema: JobId },
    refusals: [...A, "invalid_request", "not_found", "conflict", "legacy_unsupported", "idempotency_key_required"],
    keyed: false,
    deprecated: true,
  } as const);

/** The three deprecated predecessor submission routes. */
export const PREDECESSOR_SUBMISSION_OPERATIONS = [
  predecessor(1, "/api/jobs"),
  predecessor(2, "/api/v2/jobs"),
  predecessor(3, "/api/v3/jobs"),
];
