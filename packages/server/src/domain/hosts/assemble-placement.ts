import { type AttemptPlacement, CargoInvocation, JobAdmission, SourceEntry } from "@kiln/contract";
import type { AttemptRow, JobRow, LineageDrop } from "@kiln/storage";
import { type Static, Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { SIZE_SHAPES } from "../policy/platform-limits.js";

/** Processes a sandbox may hold, per vCPU of its size (cargo and rustc fan out per core). */
const PIDS_PER_VCPU = 512;

const JobSource = Type.Array(SourceEntry);

/** A stored job part that does not match its schema: the job cannot be placed as recorded. */
export class UnplaceableJobError extends Error {}

function parseStored<S extends Parameters<typeof Value.Check>[0]>(schema: S, column: string, text: string | null) {
  if (text === null) throw new UnplaceableJobError(`the job's ${column} is missing`);
  const value: unknown = JSON.parse(text);
  if (!Value.Check(schema, value)) {
    const first = Value.Errors(schema, value).First();
    throw new UnplaceableJobError(
      `the job's ${column} does not match its schema${first === undefined ? "" : ` at ${first.path || "/"}: ${first.message}`}`,
    );
  }
  return value as Static<S>;
}

/**
 * The Placement a host receives for a claimed attempt, from what admission stored on the job:
 * its invocation, exact source manifest (stored apart: storage readJobManifest) and admission snapshot (toolchain, injected settings,
 * affected_tests), each checked against its contract schema, plus the size's limits, any
 * drop of its lineage the control plane decided since, and the lineages it may be seeded from.
 */
export function assemblePlacement(
  job: JobRow,
  sourceManifest: string | undefined,
  attempt: AttemptRow,
  drop: LineageDrop | undefined,
  seeds?: AttemptPlacement["lineageSeeds"],
): AttemptPlacement {
  const shape = SIZE_SHAPES[job.size];
  if (shape === undefined) throw new UnplaceableJobError(`the job's size ${job.size} is not one this platform offers`);
  const admission = parseStored(JobAdmission, "admission record", job.admitted);
  return {
    jobId: job.id,
    attempt: attempt.number,
    leaseToken: attempt.lease_token,
    size: job.size,
    limits: {
      vcpus: shape.vcpus,
      memoryBytes: shape.memoryBytes,
      pids: shape.vcpus * PIDS_PER_VCPU,
      diskBytes: shape.diskBytes,
    },
    invocation: parseStored(CargoInvocation, "invocation", job.invocation),
    toolchain: admission.toolchain,
    source: parseStored(JobSource, "source manifest", sourceManifest ?? null),
    wallClockSeconds: job.wall_clock_seconds,
    tenant: job.tenant_id,
    repository: job.repository,
    jobClass: job.class,
    lineageDrop: drop === undefined ? null : { reason: drop.reason, throughGeneration: drop.throughGeneration },
    ...(seeds === undefined ? {} : { lineageSeeds: seeds }),
    injections: admission.injections,
    network: {
      policy: admission.network_policy,
      reason: admission.network_policy_reason ?? "decided at admission",
    },
    affectedTests: admission.affected_tests,
    // Jobs admitted before issue 37 carry neither: the host then uses the platform defaults.
    ...(admission.flaky_retries === undefined ? {} : { flakyRetries: admission.flaky_retries }),
    ...(admission.flaky_policy === undefined ? {} : { flakyPolicy: admission.flaky_policy }),
  };
}
