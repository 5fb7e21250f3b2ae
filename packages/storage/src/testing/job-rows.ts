import type { AttemptCompletion } from "../jobs/finish-attempt.js";
import type { NewJob } from "../jobs/insert-job.js";

/**
 * The row of a queued, not yet admitted `cargo test --workspace` of acme/widget on kiln2-cpu, as
 * the tests insert it (insertJob). The caller names what makes each job its own: id, submission
 * key, request hash and queue time; `overrides` changes any other column.
 */
export function queuedJob(
  unique: { id: string; tenant: string; submissionKey: string; requestHash: string; queuedAt: string },
  overrides: Partial<NewJob> = {},
): NewJob {
  return {
    id: unique.id,
    tenant_id: unique.tenant,
    repository: "acme/widget",
    branch: "main",
    base_commit: "0123456789abcdef0123456789abcdef01234567",
    head_sha: null,
    size: "kiln2-cpu",
    class: "test:stable:kiln2-cpu",
    description: "cargo test --workspace",
    status: "queued",
    submitted_by: "u_test",
    submission_key: unique.submissionKey,
    request_hash: unique.requestHash,
    invocation: JSON.stringify({ operation: "test", arguments: [] }),
    source_manifest: "[]",
    wall_clock_seconds: 3600,
    max_attempts: 3,
    attempts_started: 0,
    accepted_at: unique.queuedAt,
    queued_at: unique.queuedAt,
    admitted: null,
    retry_of: null,
    ...overrides,
  };
}

/**
 * What a host reports when an attempt ends `outcome` (finishAttempt's `result`): exit code 0, or
 * 101 with one failed test; an empty report, no cargo output, no artifacts, an hour's artifact
 * retention. `overrides` changes any other field.
 */
export function attemptCompletion(
  outcome: AttemptCompletion["outcome"] = "passed",
  overrides: Partial<AttemptCompletion> = {},
): AttemptCompletion {
  return {
    outcome,
    exitCode: outcome === "passed" ? 0 : 101,
    failure: outcome === "passed" ? null : { phase: "test", cause: "test_failure", detail: "1 test failed" },
    report: "{}",
    cargoOutput: null,
    artifacts: [],
    artifactRetentionSeconds: 3600,
    ...overrides,
  };
}
