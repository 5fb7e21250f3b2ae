import type { JobRecord, JobRow } from "@kiln/storage";

/** Platform limits a job carries (the repository setting arrives with lineages and settings). */
export const PLATFORM_WALL_CLOCK_SECONDS = 3600;
export const MAX_ATTEMPTS = 3;
export const ARTIFACT_RETENTION_SECONDS = 7 * 24 * 3600;

/** vCPUs and memory of each size (DESIGN.md §6). */
export const SIZE_SHAPES: Readonly<Record<string, { vcpus: number; memoryBytes: number }>> = {
  "kiln2-cpu": { vcpus: 2, memoryBytes: 4 * 2 ** 30 },
  "kiln4-cpu": { vcpus: 4, memoryBytes: 8 * 2 ** 30 },
  "kiln8-cpu": { vcpus: 8, memoryBytes: 16 * 2 ** 30 },
  "kiln16-cpu": { vcpus: 16, memoryBytes: 32 * 2 ** 30 },
};

export const VCPUS_OF_SIZE: Readonly<Record<string, number>> = Object.fromEntries(
  Object.entries(SIZE_SHAPES).map(([size, shape]) => [size, shape.vcpus]),
);

export const TERMINAL_STATUSES = new Set(["passed", "failed", "cancelled"]);

export function parseJson<T>(text: string | null): T | null {
  return text === null ? null : (JSON.parse(text) as T);
}

interface AttemptUnit {
  id: string;
  host: string;
  isolation: "sandbox" | "microvm";
}

/** The open Job record of the contract, from its stored parts. */
export function jobView(
  record: JobRecord | { job: JobRow; transitions: JobRecord["transitions"]; attempts: JobRecord["attempts"] },
) {
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
      const unit = parseJson<{ unit?: AttemptUnit }>(a.report)?.unit;
      return {
        id: unit?.id ?? `${job.id}-a${a.number}`,
        host: a.host_id,
        size: job.size as "kiln2-cpu",
        isolation: unit?.isolation ?? "sandbox",
        started_at: a.started_at,
        finished_at: a.finished_at,
        attempt: a.number,
      };
    }),
    transitions: record.transitions.map((t) => ({ from: t.from_status, to: t.to_status, at: t.at, reason: t.reason })),
    failure: parseJson(job.failure),
    queue_annotation: job.queue_annotation,
    retry_of: job.retry_of,
  };
}
