import { type Kysely, sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import type { Database } from "../schema.js";

/**
 * A new job's source manifest: its JSON text, or the manifest of another job (a retry's
 * original), copied by the database without passing through this process.
 */
export type NewJobManifest = string | { readonly copiedFrom: string };

/**
 * Stores a new job's source manifest in `job_manifests` (migration 0042), out of the job's row,
 * in the transaction that inserts the job. A manifest to copy that is not there is an error:
 * the job could never be placed.
 */
export async function insertJobManifest(trx: Kysely<Database>, jobId: string, manifest: NewJobManifest): Promise<void> {
  if (typeof manifest === "string") {
    await trx.insertInto("job_manifests").values({ job_id: jobId, manifest }).execute();
    return;
  }
  const copied = await trx
    .insertInto("job_manifests")
    .columns(["job_id", "manifest"])
    .expression((eb) =>
      eb
        .selectFrom("job_manifests")
        .select([sql<string>`${jobId}`.as("job_id"), "manifest"])
        .where("job_id", "=", manifest.copiedFrom),
    )
    .executeTakeFirst();
  if (Number(copied.numInsertedOrUpdatedRows ?? 0n) !== 1) {
    throw new Error(`job ${manifest.copiedFrom} has no source manifest to copy to job ${jobId}`);
  }
}

/**
 * A job's source manifest as stored (JSON text), for what needs it: an attempt's placement.
 * Undefined when the job has none. Nothing that shows a job reads it.
 */
export async function readJobManifest(target: StorageOrTransaction, jobId: string): Promise<string | undefined> {
  const row = await executorOf(target)
    .selectFrom("job_manifests")
    .select("manifest")
    .where("job_id", "=", jobId)
    .executeTakeFirst();
  return row?.manifest;
}
