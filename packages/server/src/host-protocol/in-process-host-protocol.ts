import type { AttemptRef, AttemptResult, HostProtocol, LogLine, Placement } from "@kiln/host";
import {
  appendLogRecords,
  type Clock,
  claimNextJob,
  findLineageDrop,
  finishAttempt,
  type LocalBlobStore,
  recordLineageSave,
  registerHost,
  renewAttemptLease,
  type Storage,
} from "@kiln/storage";
import { jobActivity } from "../jobs/job-activity.js";
import { ARTIFACT_RETENTION_SECONDS, parseJson, SIZE_SHAPES, VCPUS_OF_SIZE } from "../jobs/job-view.js";
import { storageQuotaBytes } from "../repositories/storage-quota.js";

/** How long a lease lives without a heartbeat; hosts renew every few seconds. */
export const LEASE_SECONDS = 15;

/** Processes a sandbox may hold, per vCPU of its size (cargo and rustc fan out per core). */
const PIDS_PER_VCPU = 512;

/**
 * The control plane's side of the host protocol, bound in-process for the embedded
 * local host. An HTTP binding of the same interface serves remote `kiln-host`s.
 */
export function inProcessHostProtocol(deps: {
  storage: Storage;
  blobs: LocalBlobStore;
  clock: Clock;
  storageQuotaBytes?: number;
}): HostProtocol {
  const { storage, blobs, clock } = deps;
  const quotaBytes = storageQuotaBytes(deps.storageQuotaBytes);
  return {
    async enroll(host) {
      await registerHost(storage, { ...host, now: clock.now() });
    },

    async claim(hostId, freeVcpus): Promise<Placement | null> {
      const placed = await claimNextJob(storage, {
        hostId,
        freeVcpus,
        vcpusOfSize: VCPUS_OF_SIZE,
        leaseSeconds: LEASE_SECONDS,
        now: clock.now(),
      });
      if (placed === undefined) return null;
      const { job, attempt } = placed;
      const shape = SIZE_SHAPES[job.size] ?? { vcpus: 2, memoryBytes: 4 * 2 ** 30 };
      const admitted = parseJson<{
        toolchain: string;
        injections?: Placement["injections"];
        affected_tests?: boolean;
      }>(job.admitted);
      const drop = await findLineageDrop(storage, {
        tenantId: job.tenant_id,
        repository: job.repository,
        class: job.class,
      });
      return {
        jobId: job.id,
        attempt: attempt.number,
        leaseToken: attempt.lease_token,
        size: job.size,
        limits: { vcpus: shape.vcpus, memoryBytes: shape.memoryBytes, pids: shape.vcpus * PIDS_PER_VCPU },
        invocation: JSON.parse(job.invocation),
        toolchain: admitted?.toolchain ?? "stable",
        source: JSON.parse(job.source_manifest),
        wallClockSeconds: job.wall_clock_seconds,
        // The lineage key: the host keeps warm cargo state per tenant, repository and class.
        tenant: job.tenant_id,
        repository: job.repository,
        jobClass: job.class,
        lineageDrop: drop === undefined ? null : { reason: drop.reason, throughGeneration: drop.throughGeneration },
        injections: admitted?.injections ?? [],
        affectedTests: admitted?.affected_tests ?? false,
      };
    },

    async heartbeat(ref: AttemptRef) {
      const renewal = await renewAttemptLease(storage, { ...ref, leaseSeconds: LEASE_SECONDS, now: clock.now() });
      if (renewal.kind === "stale") return "stale";
      return renewal.cancelRequested ? "cancel" : "continue";
    },

    async appendLogs(ref: AttemptRef, lines: readonly LogLine[]) {
      const accepted = await appendLogRecords(storage, { ...ref, lines });
      if (accepted) jobActivity.notify(ref.jobId);
      return accepted ? "accepted" : "stale";
    },

    fetchBlob: (sha256) => blobs.get(sha256),
    putBlob: (bytes) => blobs.put(bytes),

    async finish(ref: AttemptRef, result: AttemptResult) {
      const now = clock.now();
      const row = await storage.db
        .selectFrom("attempts")
        .innerJoin("jobs", "jobs.id", "attempts.job_id")
        .select([
          "attempts.started_at",
          "attempts.vcpus",
          "attempts.host_id",
          "jobs.size",
          "jobs.cancel_requested_at",
          "jobs.tenant_id",
          "jobs.repository",
          "jobs.class",
        ])
        .where("attempts.job_id", "=", ref.jobId)
        .where("attempts.number", "=", ref.attempt)
        .executeTakeFirst();
      if (row === undefined) return "stale";
      // Metering closes at the cancellation request: nothing after a cancel is billed.
      const end =
        row.cancel_requested_at !== null && row.cancel_requested_at < now.toISOString()
          ? new Date(row.cancel_requested_at)
          : now;
      const seconds = Math.max(0, Math.ceil((end.getTime() - new Date(row.started_at).getTime()) / 1000));
      const finished = await finishAttempt(storage, {
        ...ref,
        now,
        result: {
          outcome: result.outcome,
          exitCode: result.exitCode,
          failure: result.failure,
          report: JSON.stringify(result.report),
          cargoOutput: result.cargoOutput,
          artifacts: result.artifacts,
          artifactRetentionSeconds: ARTIFACT_RETENTION_SECONDS,
          usage: { size: row.size, seconds, vcpuSeconds: seconds * row.vcpus },
        },
      });
      if (finished !== "finished") return finished;
      jobActivity.notify(ref.jobId);
      // Lineage accounting: what the attempt saved counts against the tenant's quota; over it,
      // the least recently used lineages are evicted (and dropped by the host at their next job).
      const saved = savedLineageOf(result.report);
      if (saved !== null) {
        await recordLineageSave(storage, {
          tenantId: row.tenant_id,
          repository: row.repository,
          class: row.class,
          host: row.host_id,
          ...saved,
          now,
          quotaBytes,
        });
      }
      return finished;
    },
  };
}

/** The lineage save an attempt's evidence reports (its `caches` item), or null when it saved none. */
function savedLineageOf(
  report: Readonly<Record<string, unknown>>,
): { lineage: string; bytes: number; generation: number; rootGeneration: number } | null {
  const caches = report.caches;
  if (!Array.isArray(caches)) return null;
  const item = caches[0] as Record<string, unknown> | undefined;
  const { lineage, saved_bytes, saved_generation, root_generation } = item ?? {};
  if (
    typeof lineage !== "string" ||
    typeof saved_bytes !== "number" ||
    typeof saved_generation !== "number" ||
    typeof root_generation !== "number"
  ) {
    return null;
  }
  return { lineage, bytes: saved_bytes, generation: saved_generation, rootGeneration: root_generation };
}
