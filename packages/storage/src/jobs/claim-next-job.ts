import type { Selectable } from "kysely";
import type { Storage } from "../dialect.js";
import type { AttemptsTable } from "../schema.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";
import type { JobRow } from "./insert-job.js";
import { newLeaseToken } from "./job-ids.js";
import { recordTransition } from "./record-transition.js";

export type AttemptRow = Selectable<AttemptsTable>;

/**
 * Places the oldest queued job that fits the host's free vCPUs as a new leased attempt.
 *
 * Locking: on PostgreSQL the candidate row is read `FOR UPDATE SKIP LOCKED`, so hosts
 * claiming at once each get a different job and never wait on one another; on SQLite
 * the transaction begins IMMEDIATE (one writer), which serializes claims. The status
 * UPDATE is additionally conditional on `status = 'queued'`, so even without row locks a
 * job can only be placed once.
 */
export async function claimNextJob(
  storage: Storage,
  input: {
    hostId: string;
    freeVcpus: number;
    vcpusOfSize: Readonly<Record<string, number>>;
    leaseSeconds: number;
    now: Date;
  },
): Promise<{ job: JobRow; attempt: AttemptRow } | undefined> {
  const fitting = Object.entries(input.vcpusOfSize)
    .filter(([, vcpus]) => vcpus <= input.freeVcpus)
    .map(([size]) => size);
  if (fitting.length === 0) return undefined;
  return storage.transaction(async (trx) => {
    let query = trx
      .selectFrom("jobs")
      .selectAll()
      .where("status", "=", "queued")
      .where("size", "in", fitting)
      .orderBy("queued_at")
      .orderBy("id")
      .limit(1);
    if (storage.capabilities.skipLocked) query = query.forUpdate().skipLocked();
    const job = await query.executeTakeFirst();
    if (job === undefined) return undefined;
    const now = formatTimestamp(input.now);
    const moved = await trx
      .updateTable("jobs")
      .set({
        status: "running",
        started_at: job.started_at ?? now,
        attempts_started: job.attempts_started + 1,
        queue_annotation: null,
      })
      .where("id", "=", job.id)
      .where("status", "=", "queued")
      .executeTakeFirst();
    if (moved.numUpdatedRows === 0n) return undefined;
    const attempt: AttemptRow = {
      job_id: job.id,
      number: job.attempts_started + 1,
      host_id: input.hostId,
      vcpus: input.vcpusOfSize[job.size] ?? 0,
      lease_token: newLeaseToken(),
      lease_expires_at: formatTimestamp(addSeconds(input.now, input.leaseSeconds)),
      state: "running",
      started_at: now,
      finished_at: null,
      outcome: null,
      exit_code: null,
      report: null,
      cargo_output_sha256: null,
      cargo_output_bytes: null,
    };
    await trx.insertInto("attempts").values(attempt).execute();
    await recordTransition(trx, {
      jobId: job.id,
      tenantId: job.tenant_id,
      repository: job.repository,
      from: "queued",
      to: "running",
      at: input.now,
      reason: `attempt ${attempt.number} placed on ${input.hostId}`,
    });
    return { job: { ...job, status: "running", attempts_started: attempt.number }, attempt };
  });
}
