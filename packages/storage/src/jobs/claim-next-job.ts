import { type ExpressionBuilder, type Selectable, sql } from "kysely";
import type { Storage } from "../dialect.js";
import type { AttemptsTable, Database } from "../schema.js";
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
 * Placement by lineage: a lineage's warm state lives on the host that saved it
 * (`lineages.host`), so a job whose lineage is there runs warm there and cold anywhere else.
 */
export interface LineageAffinity {
  /**
   * How long a queued job waits (from `queued_at`) for the live, admitting host that holds its
   * lineage before any host may take it, cold.
   */
  readonly waitSeconds: number;
  /** A host not seen (claim, health report) for longer than this, with no live lease, is gone. */
  readonly hostFreshSeconds: number;
}

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
 * controls row, that is the tenant's oldest, so a held tenant's jobs start in queue order (with
 * placement by lineage, in queue order among those this host may take, its lineages' first). The
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
 * Placement by lineage (`lineageAffinity`): a host prefers the queued jobs whose live lineage it
 * holds (`lineages.host`) — they go before older jobs, in the peek and in the tenant's pick alike
 * — and passes over a job whose lineage another host holds while that host is live and admitting
 * (serving, admission open, seen within `hostFreshSeconds` or holding an unexpired lease, no
 * lease of it lapsed since it was last seen, enough vCPUs in all for the job's size) and the job
 * has been queued for less than `waitSeconds`.
 * After that any host takes it, cold. A job whose lineage host is drained, closed on an
 * impairment, gone, or too small is taken at once. Locking: the lineage and its host are read
 * without locks, in the statements that peek and pick (each a fresh snapshot at READ COMMITTED).
 * They only choose which job to try; placement itself is still decided by the job row's lock and
 * the conditional status write, so a stale read can misplace a preference (one claim skips a job
 * whose host was drained a moment ago, and the next claim, within its poll, takes it) but can
 * never place a job twice or hold one past the bound. No lock is taken on lineages or hosts here,
 * so the lock order above (host row shared, controls row, job rows) is unchanged and cannot
 * deadlock with a drain, a lineage save or a purge.
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
    /** The largest disk quota the host can still grant (absent: disk does not limit the claim). */
    freeDiskBytes?: number;
    /** Each size's disk quota; a size whose quota exceeds `freeDiskBytes` is not placed. */
    diskBytesOfSize?: Readonly<Record<string, number>>;
    leaseSeconds: number;
    now: Date;
    /** Prefer and wait for lineage hosts (see above); without it jobs go oldest first to any host. */
    lineageAffinity?: LineageAffinity;
  },
): Promise<{ job: JobRow; attempt: AttemptRow } | undefined> {
  await recordHostSeen(storage, input.hostId, input.now);
  const diskFits = (size: string) =>
    input.freeDiskBytes === undefined ||
    (input.diskBytesOfSize?.[size] ?? Number.POSITIVE_INFINITY) <= input.freeDiskBytes;
  const fitting = Object.entries(input.vcpusOfSize)
    .filter(([size, vcpus]) => vcpus <= input.freeVcpus && diskFits(size))
    .map(([size]) => size);
  if (fitting.length === 0) return undefined;
  const affinity = input.lineageAffinity === undefined ? null : lineagePlacement(input, input.lineageAffinity);
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
        .limit(1);
      if (affinity !== null) peek = peek.where((eb) => eb.not(affinity.waitsForItsHost(eb))).orderBy(affinity.heldHere);
      peek = peek.orderBy("jobs.queued_at").orderBy("jobs.id");
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
        .where("jobs.tenant_id", "=", tenantId)
        .where("jobs.status", "=", "queued")
        .where("jobs.size", "in", fitting)
        .where((eb) => eb.or([eb("jobs.pinned_host", "is", null), eb("jobs.pinned_host", "=", input.hostId)]))
        .limit(1);
      if (affinity !== null) pick = pick.where((eb) => eb.not(affinity.waitsForItsHost(eb))).orderBy(affinity.heldHere);
      pick = pick.orderBy("jobs.queued_at").orderBy("jobs.id");
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

/**
 * The two conditions placement by lineage adds to the peek and the pick, over the outer `jobs`
 * row: whether the claiming host holds the job's live lineage (an ORDER BY key, 0 first), and
 * whether the job still waits for another live, admitting host that holds it.
 */
function lineagePlacement(
  input: { hostId: string; vcpusOfSize: Readonly<Record<string, number>>; now: Date },
  affinity: LineageAffinity,
) {
  const now = formatTimestamp(input.now);
  const seenSince = formatTimestamp(addSeconds(input.now, -affinity.hostFreshSeconds));
  const waitingSince = formatTimestamp(addSeconds(input.now, -affinity.waitSeconds));
  const sizes = Object.entries(input.vcpusOfSize);
  // The job's vCPUs from its size (sizes this table does not know need more than any host has).
  // (Numbers as literals: a bound parameter in CASE … THEN would be typed text on PostgreSQL.)
  const never = sql.lit(Number.MAX_SAFE_INTEGER);
  const vcpusOfJob =
    sizes.length === 0
      ? sql<number>`${never}`
      : sql<number>`case ${sql.ref("jobs.size")} ${sql.join(
          sizes.map(([size, vcpus]) => sql`when ${size} then ${sql.lit(Math.trunc(vcpus))}`),
          sql` `,
        )} else ${never} end`;
  const heldHere = sql<number>`case when exists (
      select 1 from lineages as held
      where held.tenant_id = jobs.tenant_id and held.repository = jobs.repository
        and held.class = jobs.class and held.state = 'live' and held.host = ${input.hostId}
    ) then 0 else 1 end`;
  const waitsForItsHost = (eb: ExpressionBuilder<Database, "jobs">) =>
    eb.and([
      eb("jobs.queued_at", ">", waitingSince),
      eb.exists(
        eb
          .selectFrom("lineages as l")
          .innerJoin("hosts as h", "h.id", "l.host")
          .select("l.lineage")
          .whereRef("l.tenant_id", "=", "jobs.tenant_id")
          .whereRef("l.repository", "=", "jobs.repository")
          .whereRef("l.class", "=", "jobs.class")
          .where("l.state", "=", "live")
          .where("l.host", "<>", input.hostId)
          .where("h.state", "=", "serving")
          .where("h.admission_closed_at", "is", null)
          .where("h.vcpus", ">=", vcpusOfJob)
          .where((live) =>
            live.or([
              live("h.last_heartbeat_at", ">", seenSince),
              live.exists(
                live
                  .selectFrom("attempts as leased")
                  .select("leased.job_id")
                  .whereRef("leased.host_id", "=", "h.id")
                  .where("leased.state", "=", "running")
                  .where("leased.lease_expires_at", ">", now),
              ),
            ]),
          )
          // A host one of whose leases lapsed (an attempt recorded lost) since it was last seen
          // stopped renewing: gone, though its last sign of life is recent (a killed host's
          // requeued job does not wait for it).
          .where((live) =>
            live.not(
              live.exists(
                live
                  .selectFrom("attempts as lapsed")
                  .select("lapsed.job_id")
                  .whereRef("lapsed.host_id", "=", "h.id")
                  .where("lapsed.state", "=", "lost")
                  .where((since) =>
                    since.or([
                      since("h.last_heartbeat_at", "is", null),
                      since("lapsed.finished_at", ">", since.ref("h.last_heartbeat_at")),
                    ]),
                  ),
              ),
            ),
          ),
      ),
    ]);
  return { heldHere, waitsForItsHost };
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
