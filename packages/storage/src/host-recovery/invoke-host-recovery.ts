import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import {
  type HostRecoveryRecord,
  newHostOperationId,
  OPEN_RECOVERY_STATES,
  recoveryRecordOf,
} from "./host-recovery-records.js";
import { withRecoverySteps } from "./read-host-recovery-steps.js";

export interface HostRecoveryInvocationInput {
  hostId: string;
  /** The incident it answers; null: the host's open incident, if any. */
  incidentId: string | null;
  request: string;
  /** `operator_api`, `command_line`, or `automatic` for the platform's own. */
  surface: string;
  operator: string;
  rescueRead: boolean;
  rescueSshPublicKey: string | null;
  /** The host operation revision read; null for the platform's automatic recovery. */
  expectedRevision: number | null;
  /** An automatic recovery is counted against its incident's automatic recoveries. */
  automatic: boolean;
  now: Date;
}

export type HostRecoveryInvocationResult =
  | { kind: "recorded"; recovery: HostRecoveryRecord; operationRevision: number }
  | { kind: "replayed"; recovery: HostRecoveryRecord }
  | { kind: "in_progress"; recovery: HostRecoveryRecord }
  | { kind: "not_found"; what: "host" | "incident" }
  | { kind: "conflict"; operationRevision: number };

/**
 * Records a recovery invocation for the host operator to run (nothing runs here). In order: a
 * retry with a recorded request replays that invocation; while a recovery of the host is open
 * (`recorded`) or running it is returned instead; else the host operation revision must be the
 * one read, and the invocation is recorded, moving the revision on.
 *
 * Locking: the host row is read FOR UPDATE on PostgreSQL, so two invocations of one host run
 * one after the other and the second sees the first's recovery (open, or its request); on
 * SQLite the transaction holds the single write lock from its start. Run it in the transaction
 * that audits it.
 */
export async function invokeHostRecovery(
  trx: Kysely<Database>,
  input: HostRecoveryInvocationInput,
  rowLocks: boolean,
): Promise<HostRecoveryInvocationResult> {
  let hostQuery = trx.selectFrom("hosts").select(["id", "operation_revision"]).where("id", "=", input.hostId);
  if (rowLocks) hostQuery = hostQuery.forUpdate();
  const host = await hostQuery.executeTakeFirst();
  if (host === undefined) return { kind: "not_found", what: "host" };

  let incidentId = input.incidentId;
  if (incidentId !== null) {
    const incident = await trx
      .selectFrom("host_incidents")
      .select("id")
      .where("id", "=", incidentId)
      .where("host_id", "=", input.hostId)
      .executeTakeFirst();
    if (incident === undefined) return { kind: "not_found", what: "incident" };
  } else {
    const open = await trx
      .selectFrom("host_incidents")
      .select("id")
      .where("host_id", "=", input.hostId)
      .where("state", "=", "open")
      .executeTakeFirst();
    incidentId = open?.id ?? null;
  }

  const recorded = await trx
    .selectFrom("host_recoveries")
    .selectAll()
    .where("host_id", "=", input.hostId)
    .where("request", "=", input.request)
    .executeTakeFirst();
  if (recorded !== undefined) {
    const [recovery] = await withRecoverySteps(trx, [recorded]);
    if (recovery !== undefined) return { kind: "replayed", recovery };
  }
  const open = await trx
    .selectFrom("host_recoveries")
    .selectAll()
    .where("host_id", "=", input.hostId)
    .where("state", "in", [...OPEN_RECOVERY_STATES])
    .orderBy("invoked_at", "desc")
    .executeTakeFirst();
  if (open !== undefined) {
    const [recovery] = await withRecoverySteps(trx, [open]);
    if (recovery !== undefined) return { kind: "in_progress", recovery };
  }
  const revision = Number(host.operation_revision);
  if (input.expectedRevision !== null && input.expectedRevision !== revision) {
    return { kind: "conflict", operationRevision: revision };
  }

  const row = await trx
    .insertInto("host_recoveries")
    .values({
      id: newHostOperationId("rec"),
      host_id: input.hostId,
      incident_id: incidentId,
      request: input.request,
      surface: input.surface,
      operator: input.operator,
      rescue_read: input.rescueRead ? 1 : 0,
      rescue_ssh_public_key: input.rescueSshPublicKey,
      state: "recorded",
      invoked_at: formatTimestamp(input.now),
      holder: null,
      claimed_at: null,
      finished_at: null,
      outcome_detail: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  const moved = await trx
    .updateTable("hosts")
    .set({ operation_revision: sql<number>`operation_revision + 1` })
    .where("id", "=", input.hostId)
    .returning("operation_revision")
    .executeTakeFirstOrThrow();
  if (input.automatic && incidentId !== null) {
    await trx
      .updateTable("host_incidents")
      .set({
        automatic_recoveries_spent: sql<number>`automatic_recoveries_spent + 1`,
        revision: sql<number>`revision + 1`,
      })
      .where("id", "=", incidentId)
      .execute();
  }
  return {
    kind: "recorded",
    recovery: recoveryRecordOf(row, []),
    operationRevision: Number(moved.operation_revision),
  };
}
