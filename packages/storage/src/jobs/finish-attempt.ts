import type { Kysely } from "kysely";
import { loseAttemptToSweep } from "../artifact-blobs/lose-attempt-to-sweep.js";
import { recordPublishedBlobs } from "../artifact-blobs/record-published-blobs.js";
import type { Storage } from "../dialect.js";
import type { Database } from "../schema.js";
import { readTenantSettings } from "../tenant-policy/read-tenant-settings.js";
import { recordTestOutcomes } from "../test-history/record-test-outcomes.js";
import { formatTimestamp } from "../timestamps.js";
import type { AttemptRow } from "./claim-next-job.js";
import type { JobRow } from "./insert-job.js";
import { settleJob } from "./settle-job.js";

export interface AttemptCompletion {
  /** passed / failed end the job; cancelled ends it cancelled (a lost attempt is answer-lost-attempt.ts's). */
  readonly outcome: "passed" | "failed" | "cancelled";
  readonly exitCode: number | null;
  readonly failure: { phase: string; cause: string; detail: string } | null;
  /** JSON of the attempt's evidence. */
  readonly report: string;
  readonly cargoOutput: { sha256: string; bytes: number } | null;
  readonly artifacts: readonly { path: string; bytes: number; sha256: string; executable?: boolean }[];
  /** How long published artifacts are served when the job's tenant set no artifact retention of its own. */
  readonly artifactRetentionSeconds: number;
}

/** Metered usage of one attempt. */
export interface AttemptUsage {
  readonly size: string;
  readonly seconds: number;
  readonly vcpuSeconds: number;
}

/** What metering is computed from, read inside the finishing transaction. */
export interface MeteredAttempt {
  readonly startedAt: string;
  readonly vcpus: number;
  readonly size: string;
  readonly cancelRequestedAt: string | null;
}

/**
 * Completes an attempt and settles its job, exactly once. Fenced: the UPDATE of the
 * attempt matches only the current lease token on a running attempt, so a stale host
 * (whose attempt was reclaimed and re-placed) can never report over a newer attempt.
 * The job's terminal status, usage and settlement are written in the same transaction.
 */
export async function finishAttempt(
  storage: Storage,
  input: {
    jobId: string;
    attempt: number;
    leaseToken: string;
    now: Date;
    result: AttemptCompletion;
    /** The attempt's usage, from what the transaction read (the control plane's metering rule). */
    meter: (attempt: MeteredAttempt) => AttemptUsage;
    /** Runs in the same transaction once the attempt finished (e.g. lineage accounting). */
    onFinished?: (trx: Kysely<Database>, job: JobRow, attempt: AttemptRow) => Promise<void>;
  },
): Promise<"finished" | "stale"> {
  const now = formatTimestamp(input.now);
  return storage.transaction(async (trx) => {
    const r = input.result;
    const leased = await trx
      .selectFrom("attempts")
      .selectAll()
      .where("job_id", "=", input.jobId)
      .where("number", "=", input.attempt)
      .where("lease_token", "=", input.leaseToken)
      .where("state", "=", "running")
      .executeTakeFirst();
    if (leased === undefined) return "stale";
    // Before anything is settled: the artifact digests' rows (locked, shared with the retention
    // sweep, artifact-blobs/). Bytes swept after the host stored them are never published: the
    // attempt is lost instead and the job tries again.
    const swept = await recordPublishedBlobs(trx, {
      artifacts: r.artifacts,
      retained: r.cargoOutput === null ? [] : [r.cargoOutput.sha256],
      now: input.now,
      rowLocks: storage.capabilities.rowLocks,
    });
    if (swept.length > 0) {
      const { jobId, attempt, leaseToken } = input;
      const rowLocks = storage.capabilities.rowLocks;
      return loseAttemptToSweep(trx, { jobId, attempt, leaseToken, now: input.now, rowLocks, swept });
    }
    const fenced = await trx
      .updateTable("attempts")
      .set({
        state: "finished",
        finished_at: now,
        outcome: r.outcome,
        exit_code: r.exitCode,
        report: r.report,
        cargo_output_sha256: r.cargoOutput?.sha256 ?? null,
        cargo_output_bytes: r.cargoOutput?.bytes ?? null,
      })
      .where("job_id", "=", input.jobId)
      .where("number", "=", input.attempt)
      .where("lease_token", "=", input.leaseToken)
      .where("state", "=", "running")
      .executeTakeFirst();
    if (fenced.numUpdatedRows === 0n) return "stale";
    // Locked (where rows lock; SQLite has one writer): a cancellation landing now waits, so the
    // status read here is the one settled.
    let jobQuery = trx.selectFrom("jobs").selectAll().where("id", "=", input.jobId);
    if (storage.capabilities.rowLocks) jobQuery = jobQuery.forUpdate();
    const job = await jobQuery.executeTakeFirstOrThrow();
    const status = r.outcome === "cancelled" || job.status === "cancellation_requested" ? "cancelled" : r.outcome;
    const metered = input.meter({
      startedAt: leased.started_at,
      vcpus: leased.vcpus,
      size: job.size,
      cancelRequestedAt: job.cancel_requested_at,
    });
    const usage = { size: metered.size, seconds: metered.seconds, vcpu_seconds: metered.vcpuSeconds, closed_at: now };
    await settleJob(trx, {
      job,
      to: status,
      at: input.now,
      failure: status === "passed" ? null : (r.failure ?? { phase: "build", cause: "cancelled", detail: "cancelled" }),
      attempts: input.attempt,
      usage,
      reason:
        status === "passed"
          ? `attempt ${input.attempt} passed`
          : status === "cancelled"
            ? `attempt ${input.attempt} reaped after cancellation`
            : `attempt ${input.attempt} failed: ${r.failure?.cause ?? "unknown"}`,
    });
    if (status !== "cancelled") {
      // The repository's test history (repositories.tests) learns the job's tests as it settles.
      await recordTestOutcomes(trx, {
        jobId: job.id,
        tenantId: job.tenant_id,
        repository: job.repository,
        attempt: input.attempt,
        finishedAt: now,
        report: r.report,
      });
    }
    if (r.artifacts.length > 0) {
      // The tenant's artifact_retention_days when it set one, read in this transaction: artifacts
      // are kept as long as the retention in force when they are published says.
      const tenantDays = (await readTenantSettings(trx, { tenantId: job.tenant_id }))?.artifactRetentionDays ?? null;
      const retentionSeconds = tenantDays === null ? r.artifactRetentionSeconds : tenantDays * 86_400;
      const expires = formatTimestamp(new Date(input.now.getTime() + retentionSeconds * 1000));
      await trx
        .insertInto("artifacts")
        .values(
          r.artifacts.map((a, idx) => ({
            job_id: input.jobId,
            attempt: input.attempt,
            idx,
            path: a.path,
            bytes: a.bytes,
            sha256: a.sha256,
            executable: a.executable === true ? 1 : 0,
            published_at: now,
            expires_at: expires,
          })),
        )
        .execute();
    }
    await input.onFinished?.(trx, job, leased);
    return "finished";
  });
}
