import type { Storage } from "../dialect.js";
import { type AttemptRow, claimNextJob } from "../jobs/claim-next-job.js";
import { type AttemptCompletion, finishAttempt } from "../jobs/finish-attempt.js";
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

/**
 * A host's claim as the tests make it (claimNextJob at `now`): kiln2-cpu at 2 vCPUs, `freeVcpus`
 * free (8 unless given), a lease of `leaseSeconds` (60 unless given).
 */
export function claimAs(
  storage: Storage,
  hostId: string,
  now: Date,
  opts: { freeVcpus?: number; leaseSeconds?: number } = {},
): ReturnType<typeof claimNextJob> {
  return claimNextJob(storage, {
    hostId,
    freeVcpus: opts.freeVcpus ?? 8,
    vcpusOfSize: { "kiln2-cpu": 2 },
    leaseSeconds: opts.leaseSeconds ?? 60,
    now,
  });
}

/**
 * Ends the attempt a claim placed (finishAttempt at `now`) with `result`, metered as `seconds`
 * of wall time on its size's 2 vCPUs.
 */
export function finishPlaced(
  storage: Storage,
  placed: { job: { id: string }; attempt: AttemptRow },
  now: Date,
  result: AttemptCompletion = attemptCompletion(),
  seconds = 0,
): Promise<"finished" | "stale"> {
  return finishAttempt(storage, {
    jobId: placed.job.id,
    attempt: placed.attempt.number,
    leaseToken: placed.attempt.lease_token,
    now,
    result,
    meter: (attempt) => ({ size: attempt.size, seconds, vcpuSeconds: seconds * 2 }),
  });
}
