import { type Kysely, type Selectable, sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { hostPlacementSubject, JOB_CHANNELS, notifyAtCommit } from "../notifications/job-notices.js";
import type { Database, HostsTable } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import { recordHostTransition } from "./record-host-transition.js";

/** A host as the operator reads it: its row and how many attempts it runs now. */
export interface HostRecord {
  id: string;
  vcpus: number;
  memoryBytes: number;
  isolation: string;
  /** Why the host serves with that isolation, as it said when it enrolled; null when it did not say. */
  isolationReason: string | null;
  state: "serving" | "draining";
  revision: number;
  enrolledAt: string;
  lastHeartbeatAt: string | null;
  drainedBy: string | null;
  drainedAt: string | null;
  drainReason: string | null;
  lastChange: { actor: string; action: string; at: string; reason: string | null } | null;
  runningAttempts: number;
  /** The release an operator registered as deployed (operator.hosts.deployment.register). */
  deployedRelease: { release: string; sha256: string | null; at: string } | null;
}

type HostRow = Selectable<HostsTable>;

function recordOf(row: HostRow, runningAttempts: number): HostRecord {
  return {
    id: row.id,
    vcpus: row.vcpus,
    memoryBytes: Number(row.memory_bytes),
    isolation: row.isolation,
    isolationReason: row.isolation_reason,
    state: row.state,
    revision: Number(row.revision),
    enrolledAt: row.enrolled_at,
    lastHeartbeatAt: row.last_heartbeat_at,
    drainedBy: row.drained_by,
    drainedAt: row.drained_at,
    drainReason: row.drain_reason,
    lastChange:
      row.last_actor === null || row.last_action === null || row.last_at === null
        ? null
        : { actor: row.last_actor, action: row.last_action, at: row.last_at, reason: row.last_reason },
    runningAttempts,
    deployedRelease:
      row.deployed_release === null || row.deployed_at === null
        ? null
        : { release: row.deployed_release, sha256: row.deployed_release_sha256, at: row.deployed_at },
  };
}

async function runningAttemptsOf(db: Kysely<Database>, hostIds: readonly string[]): Promise<Map<string, number>> {
  if (hostIds.length === 0) return new Map();
  const rows = await db
    .selectFrom("attempts")
    .select(["host_id", (eb) => eb.fn.countAll<number | string | bigint>().as("n")])
    .where("state", "=", "running")
    .where("host_id", "in", [...hostIds])
    .groupBy("host_id")
    .execute();
  return new Map(rows.map((r) => [r.host_id, Number(r.n)]));
}

/** Every host kiln has recorded (the embedded one and enrolled remote ones), by id. */
export async function listHostRecords(target: StorageOrTransaction): Promise<HostRecord[]> {
  const db = executorOf(target);
  const rows = await db.selectFrom("hosts").selectAll().orderBy("id").execute();
  const running = await runningAttemptsOf(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => recordOf(r, running.get(r.id) ?? 0));
}

/** One host, or undefined when kiln has recorded none by that id. */
export async function readHostRecord(target: StorageOrTransaction, hostId: string): Promise<HostRecord | undefined> {
  const db = executorOf(target);
  const row = await db.selectFrom("hosts").selectAll().where("id", "=", hostId).executeTakeFirst();
  if (row === undefined) return undefined;
  const running = await runningAttemptsOf(db, [hostId]);
  return recordOf(row, running.get(hostId) ?? 0);
}

export type HostStateChange =
  | { kind: "changed"; host: HostRecord }
  | { kind: "not_found" }
  | { kind: "conflict"; state: "serving" | "draining"; revision: number };

/**
 * Drains a serving host: a conditional write (`state = 'serving'`) that moves it to `draining`
 * and its revision on, recording who and why. From then on claimNextJob places nothing on it;
 * its running attempts continue. Run it in the transaction that audits it. On PostgreSQL the
 * write's row lock orders it against claims, which read the host row `FOR SHARE`: a claim that
 * began before waits out the drain's commit no longer than its own transaction, and every claim
 * after the drain commits sees `draining`.
 */
export async function drainHost(
  trx: Kysely<Database>,
  input: { hostId: string; actor: string; action: string; reason: string | null; now: Date },
): Promise<HostStateChange> {
  const now = formatTimestamp(input.now);
  const moved = await trx
    .updateTable("hosts")
    .set({
      state: "draining",
      revision: sql<number>`revision + 1`,
      drained_by: input.actor,
      drained_at: now,
      drain_reason: input.reason,
      last_actor: input.actor,
      last_action: input.action,
      last_at: now,
      last_reason: input.reason,
    })
    .where("id", "=", input.hostId)
    .where("state", "=", "serving")
    .returningAll()
    .executeTakeFirst();
  if (moved !== undefined) {
    await recordHostTransition(trx, {
      ...input,
      from: "serving",
      to: "draining",
      at: input.now,
      revision: Number(moved.revision),
    });
    // Ends the host's waiting claim (it answers nothing), and releases jobs that waited for it
    // as their lineage's host, at the drain's commit.
    await notifyAtCommit(trx, JOB_CHANNELS.placement, hostPlacementSubject(input.hostId));
  }
  return settleHostChange(trx, input.hostId, moved);
}

/**
 * Returns a draining host to placement, naming the revision the operator read (its policy
 * revision): a conditional write on `state = 'draining' AND revision = expected`. A serving host,
 * or a moved-past revision, is a conflict naming the current state and revision.
 */
export async function undrainHost(
  trx: Kysely<Database>,
  input: { hostId: string; expectedRevision: number; actor: string; action: string; reason: string | null; now: Date },
): Promise<HostStateChange> {
  const now = formatTimestamp(input.now);
  const moved = await trx
    .updateTable("hosts")
    .set({
      state: "serving",
      revision: sql<number>`revision + 1`,
      drained_by: null,
      drained_at: null,
      drain_reason: null,
      last_actor: input.actor,
      last_action: input.action,
      last_at: now,
      last_reason: input.reason,
    })
    .where("id", "=", input.hostId)
    .where("state", "=", "draining")
    .where("revision", "=", input.expectedRevision)
    .returningAll()
    .executeTakeFirst();
  if (moved !== undefined) {
    await recordHostTransition(trx, {
      ...input,
      from: "draining",
      to: "serving",
      at: input.now,
      revision: Number(moved.revision),
    });
    // The host may take work again: its waiting claim reads the queue at the undrain's commit.
    await notifyAtCommit(trx, JOB_CHANNELS.placement, hostPlacementSubject(input.hostId));
  }
  return settleHostChange(trx, input.hostId, moved);
}

/** The outcome of a conditional write of a host row: the host as changed, or why not. */
export async function settleHostChange(
  trx: Kysely<Database>,
  hostId: string,
  moved: HostRow | undefined,
): Promise<HostStateChange> {
  if (moved !== undefined) {
    const running = await runningAttemptsOf(trx, [hostId]);
    return { kind: "changed", host: recordOf(moved, running.get(hostId) ?? 0) };
  }
  const current = await trx
    .selectFrom("hosts")
    .select(["state", "revision"])
    .where("id", "=", hostId)
    .executeTakeFirst();
  if (current === undefined) return { kind: "not_found" };
  return { kind: "conflict", state: current.state, revision: Number(current.revision) };
}
