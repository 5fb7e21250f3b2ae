import type { Insertable, Kysely, Selectable } from "kysely";
import { inTransaction, type StorageOrTransaction } from "../executor.js";
import type { Database, JobsTable } from "../schema.js";
import { insertJobManifest, type NewJobManifest } from "./job-manifests.js";
import { recordTransition } from "./record-transition.js";

export type JobRow = Selectable<JobsTable>;

/** A job to accept: its row, and its source manifest, stored apart from the row (job-manifests.ts). */
export type NewJob = Insertable<JobsTable> & { accepted_at: string; source_manifest: NewJobManifest };

/**
 * Accepts a job, or finds the one this submission already created. The unique index
 * on (tenant_id, submission_key) makes the idempotency key the durable submission
 * identity: of two racing submissions with one key exactly one inserts (ON CONFLICT
 * DO NOTHING), and both then read the same row. The caller compares request_hash to
 * tell a replay from changed input.
 *
 * `onCreated` runs in the same transaction right after a new job is inserted (a streamed
 * archive job claims its upload there, sources/claim-upload.ts); when it throws, nothing of
 * the submission is kept.
 *
 * The source manifest goes to `job_manifests` in the same transaction (migration 0042: never in
 * the job's row, which every listing reads).
 *
 * A job whose submission key is a canary's (canaries/reserve-canary.ts: the platform reserved it
 * for one host before submitting through the public API) is pinned to that host: only it may
 * claim the job. The pin comes from the platform's own row, never from the request.
 */
export async function insertJob(
  target: StorageOrTransaction,
  input: NewJob,
  onCreated?: (trx: Kysely<Database>, job: JobRow) => Promise<void>,
): Promise<{ job: JobRow; created: boolean }> {
  const { source_manifest: manifest, ...row } = input;
  return inTransaction(target, async (trx) => {
    const canary =
      row.submission_key === null || row.submission_key === undefined
        ? undefined
        : await trx
            .selectFrom("canaries")
            .select("host_id")
            .where("id", "=", row.submission_key)
            .where("tenant_id", "=", row.tenant_id)
            .executeTakeFirst();
    const inserted = await trx
      .insertInto("jobs")
      .values(canary === undefined ? row : { ...row, pinned_host: canary.host_id })
      .onConflict((c) => c.columns(["tenant_id", "submission_key"]).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (inserted !== undefined) {
      await insertJobManifest(trx, inserted.id, manifest);
      await recordTransition(trx, {
        jobId: inserted.id,
        tenantId: inserted.tenant_id,
        repository: inserted.repository,
        from: null,
        to: "queued",
        at: new Date(inserted.accepted_at),
        reason: inserted.retry_of === null ? `submitted by ${inserted.submitted_by}` : `retry of ${inserted.retry_of}`,
      });
      await onCreated?.(trx, inserted);
      return { job: inserted, created: true };
    }
    const existing = await trx
      .selectFrom("jobs")
      .selectAll()
      .where("tenant_id", "=", row.tenant_id)
      .where("submission_key", "=", row.submission_key ?? "")
      .executeTakeFirstOrThrow();
    return { job: existing, created: false };
  });
}
