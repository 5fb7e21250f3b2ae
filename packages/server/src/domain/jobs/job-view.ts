import type { AttemptReport, DependencyReport, Job, JobFailure } from "@kiln/contract";
import type { JobListRecord, JobListRow } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { admittedSize } from "../policy/platform-limits.js";
import { storedJson } from "./stored-json.js";

/**
 * The open Job record of the contract, from its stored parts: only the job's listed columns
 * (`JOB_LIST_COLUMNS`), so a listing never reads the manifest or invocation to make one.
 */
export function jobView(record: JobListRecord<JobListRow>): Static<typeof Job> {
  const job = record.job;
  return {
    id: job.id,
    tenant: job.tenant_id,
    submitted_by: job.submitted_by,
    description: job.description,
    repo: job.repository,
    branch: job.branch,
    sha_short: (job.head_sha ?? job.base_commit).slice(0, 12),
    class: job.class,
    status: job.status,
    accepted_at: job.accepted_at,
    queued_at: job.queued_at,
    started_at: job.started_at,
    finished_at: job.finished_at,
    units: record.attempts.map((a) => {
      const unit = storedJson<AttemptReport>(a.report)?.unit;
      return {
        id: unit?.id ?? `${job.id}-a${a.number}`,
        host: a.host_id,
        size: admittedSize(job.size),
        isolation: unit?.isolation ?? "sandbox",
        started_at: a.started_at,
        finished_at: a.finished_at,
        attempt: a.number,
      };
    }),
    transitions: record.transitions.map((t) => ({ from: t.from_status, to: t.to_status, at: t.at, reason: t.reason })),
    failure: storedJson<Static<typeof JobFailure>>(job.failure),
    queue_annotation: job.queue_annotation,
    retry_of: job.retry_of,
    ...dependencyMembers(latestDependencies(record.attempts)),
  };
}

/**
 * What the dependency gateway provided the job's latest attempt that reported it: the Job
 * record carries the configuration's digest and the locked crates and git sources it came
 * from, never the configuration text.
 */
export function latestDependencies(attempts: JobListRecord["attempts"]): DependencyReport | null {
  for (const attempt of [...attempts].reverse()) {
    const dependencies = storedJson<AttemptReport>(attempt.report)?.dependencies;
    if (dependencies !== undefined) return dependencies;
  }
  return null;
}

function dependencyMembers(dependencies: DependencyReport | null) {
  if (dependencies === null) return {};
  return {
    configuration_sha256: dependencies.configuration_sha256,
    locked_crates: dependencies.locked_crates,
    git_sources: dependencies.git_sources,
  };
}
