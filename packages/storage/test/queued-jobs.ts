import type { insertJob } from "../src/index.js";

type NewJob = Parameters<typeof insertJob>[1];

/**
 * The row of a queued, not yet admitted `cargo test --workspace` of acme/widget on kiln2-cpu, as
 * the storage tests insert it. The caller names what makes each job its own: id, submission
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
