import type { Kysely } from "kysely";
import type { Database } from "../schema.js";
import { tenantQueueBlock } from "./annotate-tenant-queue.js";

/**
 * Gives a job just queued (a submission or a retry, in its insert transaction) the annotation
 * of why it waits when its tenant is held now: suspended, or at its concurrency limit. Placement
 * annotates the jobs queued when it takes the last slot (claimNextJob), but a job queued after
 * that is never looked at by a claim (the claim's peek passes over a held tenant), so without
 * this it would wait unexplained until the running job ends.
 *
 * Locking: on PostgreSQL (`rowLocks`) the tenant's controls row is read FOR SHARE before the
 * running jobs are counted. A claim of this tenant holds that row FOR UPDATE from its recount
 * until it commits, so either the claim commits first and this count sees its placement, or this
 * transaction commits first and the claim's own annotation pass (after its placement) sees this
 * job. Without the lock a placement committing between this count and this commit would leave
 * the job unannotated. The claim never waits on this job's row (uncommitted, it is invisible to
 * the claim, and its annotation pass skips locked rows), so the lock cannot deadlock. SQLite's
 * single writer orders the two already.
 */
export async function annotateQueuedJob(
  trx: Kysely<Database>,
  input: { tenantId: string; jobId: string; rowLocks: boolean },
): Promise<void> {
  if (input.rowLocks) {
    const controls = await trx
      .selectFrom("tenant_controls")
      .select("tenant_id")
      .where("tenant_id", "=", input.tenantId)
      .forShare()
      .executeTakeFirst();
    // A tenant without controls is never held (tenantQueueBlock).
    if (controls === undefined) return;
  }
  const block = await tenantQueueBlock(trx, input.tenantId);
  if (block === null) return;
  await trx
    .updateTable("jobs")
    .set({ queue_annotation: block })
    .where("id", "=", input.jobId)
    .where("status", "=", "queued")
    .where("queue_annotation", "is", null)
    .execute();
}
