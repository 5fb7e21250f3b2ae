import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import {
  type HostInitializationRecord,
  hostInitializationOf,
  type InitializationLedgerStep,
} from "./host-initialization-record.js";
import { recordHostTransition } from "./record-host-transition.js";

export type HostInitializationStart =
  | { kind: "started"; initialization: HostInitializationRecord; enrolled: boolean }
  | { kind: "conflict"; detail: string };

/**
 * Records an operator-started initialization of a host, `pending` until the host takes it on
 * its next fleet poll. A host not enrolled yet may be initialized (the caller issues its
 * one-time bootstrap credential in the same transaction); it runs the steps once enrolled.
 * Refused as a conflict while another initialization of the host is open, or when the
 * operator named a host revision that moved. Run it in the transaction that audits it.
 *
 * Locking: at most one open initialization per host is the partial unique index
 * `host_initializations_open`, and each host's ordinals are unique; a second start's insert
 * (the same ordinal, or a second open one) does nothing — on PostgreSQL it first waits for the
 * concurrent one's transaction — and answers the conflict. The host row is read
 * `FOR UPDATE` on PostgreSQL so the revision checked is the one moved on.
 */
export async function startHostInitialization(
  trx: Kysely<Database>,
  input: {
    operation: string;
    hostId: string;
    toolchains: readonly string[];
    steps: readonly InitializationLedgerStep[];
    expectedRevision: number | null;
    note: string | null;
    actor: string;
    action: string;
    now: Date;
    rowLocks: boolean;
  },
): Promise<HostInitializationStart> {
  const now = formatTimestamp(input.now);
  let hostQuery = trx.selectFrom("hosts").select(["state", "revision"]).where("id", "=", input.hostId);
  if (input.rowLocks) hostQuery = hostQuery.forUpdate();
  const host = await hostQuery.executeTakeFirst();
  if (input.expectedRevision !== null) {
    if (host === undefined) {
      return { kind: "conflict", detail: `host ${input.hostId} is not enrolled; it has no revision to name` };
    }
    if (Number(host.revision) !== input.expectedRevision) {
      return {
        kind: "conflict",
        detail: `body.expected_revision ${input.expectedRevision} is not host ${input.hostId}'s current revision ${Number(host.revision)}; re-read and start again`,
      };
    }
  }
  const previous = await trx
    .selectFrom("host_initializations")
    .select((eb) => eb.fn.max("ordinal").as("ordinal"))
    .where("host_id", "=", input.hostId)
    .executeTakeFirst();
  const inserted = await trx
    .insertInto("host_initializations")
    .values({
      operation: input.operation,
      host_id: input.hostId,
      ordinal: Number(previous?.ordinal ?? 0) + 1,
      state: "pending",
      toolchains: JSON.stringify(input.toolchains),
      started_by: input.actor,
      started_at: now,
      finished_at: null,
      failure: null,
      steps: JSON.stringify(input.steps),
      note: input.note,
    })
    .onConflict((c) => c.doNothing())
    .executeTakeFirst();
  if (inserted.numInsertedOrUpdatedRows === 0n) {
    const open = await trx
      .selectFrom("host_initializations")
      .select(["operation", "state", "started_at"])
      .where("host_id", "=", input.hostId)
      .where("state", "in", ["pending", "running"])
      .executeTakeFirst();
    return {
      kind: "conflict",
      detail:
        open === undefined
          ? `another initialization of host ${input.hostId} began at the same time`
          : `initialization ${open.operation} of host ${input.hostId} is ${open.state} since ${open.started_at}; observe it until it finishes`,
    };
  }
  let revision: number | null = null;
  if (host !== undefined) {
    const moved = await trx
      .updateTable("hosts")
      .set({
        revision: sql<number>`revision + 1`,
        last_actor: input.actor,
        last_action: input.action,
        last_at: now,
        last_reason: input.note,
      })
      .where("id", "=", input.hostId)
      .returning(["revision"])
      .executeTakeFirstOrThrow();
    revision = Number(moved.revision);
  }
  await recordHostTransition(trx, {
    hostId: input.hostId,
    from: host?.state ?? "unenrolled",
    to: "initializing",
    action: input.action,
    actor: input.actor,
    at: input.now,
    reason: `initialization ${input.operation} started${input.note === null ? "" : `: ${input.note}`}`,
    revision,
  });
  const row = await trx
    .selectFrom("host_initializations")
    .selectAll()
    .where("operation", "=", input.operation)
    .executeTakeFirstOrThrow();
  return { kind: "started", initialization: hostInitializationOf(row), enrolled: host !== undefined };
}
