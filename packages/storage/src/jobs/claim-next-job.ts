import type { Selectable } from "kysely";
import type { Storage } from "../dialect.js";
import type { AttemptsTable } from "../schema.js";
import {
  annotateTenantQueue,
  refreshTenantQueueAnnotation,
  tenantQueueBlock,
} from "../tenant-policy/annotate-tenant-queue.js";
import { SLOT_HOLDING_STATUSES } from "../tenant-policy/read-tenant-consumption.js";
import { addSeconds, formatTimestamp } from "../timestamps.js";
import type { JobRow } from "./insert-job.js";
import { newLeaseToken } from "./job-ids.js";
import { recordTransition } from "./record-transition.js";

export type AttemptRow = Selectable<AttemptsTable>;

/**
 * Places the oldest queued job that fits the host's free vCPUs as a new leased attempt — none on
 * a host the operator drained —
 * skipping tenants the operator holds (tenant_controls): a suspended tenant, or one whose jobs
 * holding a slot (running, cancellation_requested) are at its `max_running_jobs`. Such a
 * tenant's queued jobs are annotated with why they wait (tenant-policy/annotate-tenant-queue.ts)
 * and keep their queue order, so they run oldest first once a slot frees.
 *
 * Locking: on PostgreSQL the candidate row is read `FOR UPDATE SKIP LOCKED`, so hosts
 * claiming at once each get a different job and never wait on one another; on SQLite
 * the transaction begins IMMEDIATE (one writer), which serializes claims. The status
 * UPDATE is additionally conditional on `status = 'queued'`, so even without row locks a
 * job can only be placed once.
 *
 * Concurrency across processes: on PostgreSQL two claims (two hosts, or two kiln-servers) could
 * each pick a different queued job of one tenant from snapshots that count the same running
 * jobs. So a claim first peeks, without locking, at the oldest placeable job to learn its
 * tenant; if that tenant has controls, it locks the tenant's `tenant_controls` row `FOR
 * UPDATE` and counts the tenant's running jobs again. Claims of a held tenant thereby run one
 * after the other, and at READ COMMITTED the recount and the pick that follow (new statements
 * after the lock is granted) see every placement committed before — the lock is released only
 * at commit. At its limit after all, the tenant is passed over (its queued jobs annotated) and
 * the claim peeks again without it. Otherwise the claim takes the tenant's oldest queued job
 * `FOR UPDATE SKIP LOCKED`: because no claim locks a held tenant's job before holding its
 * controls row, that is the tenant's oldest, so a held tenant's jobs start in queue order. The
 * controls row is also locked by operator.tenants.controls.set, which waits on no job row;
 * annotating other queued jobs skips rows another transaction holds rather than waiting
 * (annotate-tenant-queue.ts), so the order controls row → job rows cannot deadlock. On SQLite
 * the single writer makes peek, count and pick exact already.
 *
 * Pinned jobs (a canary's, `jobs.pinned_host`) are placeable only on their host: peek and pick
 * both pass over a job pinned elsewhere, so it waits, queued, for its host (and is never taken
 * by another). No lock is added for it: the pin is written with the job and never changes, so
 * the same row locks and conditional status write decide placement as for any job.
 *
 * A claim is also the host's sign of life: `hosts.last_heartbeat_at` is moved to the claim's
 * instant when it is older than HOST_SEEN_EVERY_SECONDS (read first, so most claims write
 * nothing), outside the claim's transaction — on PostgreSQL that transaction holds the host row
 * FOR SHARE, and turning that into a write inside it could deadlock two claims of one host.
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
  await recordHostSeen(storage, input.hostId, input.now);
  const fitting = Object.entries(input.vcpusOfSize)
    .filter(([, vcpus]) => vcpus <= input.freeVcpus)
    .map(([size]) => size);
  if (fitting.length === 0) return undefined;
  return storage.transaction(async (trx) => {
    // A draining host gets no new job (operator.hosts.drain); its running attempts go on. On
    // PostgreSQL the row is read FOR SHARE, so a drain committing meanwhile waits for this claim,
    // and a claim after the drain committed sees it (host-drain.ts). A host kiln has no row for
    // (a test's bare claim) is not drained.
    let hostQuery = trx.selectFrom("hosts").select(["state", "admission_closed_at"]).where("id", "=", input.hostId);
    if (storage.capabilities.rowLocks) hostQuery = hostQuery.forShare();
    const host = await hostQuery.executeTakeFirst();
    if (host?.state === "draining") return undefined;
    // Nor does a host whose admission an impairment closed (migration 0016, host-incidents/),
    // ordered against the closing write by the same row lock.
    if (host?.admission_closed_at != null) return undefined;
    const passedOver: string[] = [];
    let job: JobRow | undefined;
    for (;;) {
      // Peek, without locking: the oldest placeable job of a tenant not held (nor passed over).
      let peek = trx
        .selectFrom("jobs")
        .select(["jobs.tenant_id"])
        .where("jobs.status", "=", "queued")
        .where("jobs.size", "in", fitting)
        .where((eb) => eb.or([eb("jobs.pinned_host", "is", null), eb("jobs.pinned_host", "=", input.hostId)]))
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom("tenant_controls as c")
                .select("c.tenant_id")
                .whereRef("c.tenant_id", "=", "jobs.tenant_id")
                .where((eb) =>
                  eb.or([
                    eb("c.suspended", "=", 1),
                    eb(
                      "c.max_running_jobs",
                      "<=",
                      eb
                        .selectFrom("jobs as r")
                        .select((r) => r.fn.countAll<number>().as("n"))
                        .whereRef("r.tenant_id", "=", "c.tenant_id")
                        .where("r.status", "in", [...SLOT_HOLDING_STATUSES]),
                    ),
                  ]),
                ),
            ),
          ),
        )
        .orderBy("jobs.queued_at")
        .orderBy("jobs.id")
        .limit(1);
      if (passedOver.length > 0) peek = peek.where("jobs.tenant_id", "not in", passedOver);
      const head = await peek.executeTakeFirst();
      if (head === undefined) return undefined;
      const tenantId = head.tenant_id;
      if (storage.capabilities.rowLocks) {
        // Claims of one held tenant go one at a time from here (see above).
        const controls = await trx
          .selectFrom("tenant_controls")
          .select("tenant_id")
          .where("tenant_id", "=", tenantId)
          .forUpdate()
          .executeTakeFirst();
        const block = controls === undefined ? null : await tenantQueueBlock(trx, tenantId);
        if (block !== null) {
          await annotateTenantQueue(trx, { tenantId, reason: block, skipLocked: true });
          passedOver.push(tenantId);
          continue;
        }
      }
      // The tenant's oldest placeable job, locked (one another claim holds is skipped).
      let pick = trx
        .selectFrom("jobs")
        .selectAll()
        .where("tenant_id", "=", tenantId)
        .where("status", "=", "queued")
        .where("size", "in", fitting)
        .where((eb) => eb.or([eb("pinned_host", "is", null), eb("pinned_host", "=", input.hostId)]))
        .orderBy("queued_at")
        .orderBy("id")
        .limit(1);
      if (storage.capabilities.skipLocked) pick = pick.forUpdate().skipLocked();
      job = await pick.executeTakeFirst();
      if (job !== undefined) break;
      passedOver.push(tenantId);
    }
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
    // The tenant's other queued jobs learn whether this placement took its last slot.
    await refreshTenantQueueAnnotation(trx, {
      tenantId: job.tenant_id,
      skipLocked: storage.capabilities.skipLocked,
    });
    return { job: { ...job, status: "running", attempts_started: attempt.number }, attempt };
  });
}

/** How stale `hosts.last_heartbeat_at` may get before a claim records the host as seen again. */
export const HOST_SEEN_EVERY_SECONDS = 10;

/** Records that the host asked for work at `now`, at most every HOST_SEEN_EVERY_SECONDS. */
async function recordHostSeen(storage: Storage, hostId: string, now: Date): Promise<void> {
  const row = await storage.db
    .selectFrom("hosts")
    .select("last_heartbeat_at")
    .where("id", "=", hostId)
    .executeTakeFirst();
  if (row === undefined) return;
  const threshold = formatTimestamp(addSeconds(now, -HOST_SEEN_EVERY_SECONDS));
  if (row.last_heartbeat_at !== null && row.last_heartbeat_at > threshold) return;
  await storage.db
    .updateTable("hosts")
    .set({ last_heartbeat_at: formatTimestamp(now) })
    .where("id", "=", hostId)
    .where((eb) => eb.or([eb("last_heartbeat_at", "is", null), eb("last_heartbeat_at", "<=", threshold)]))
    .execute();
}
