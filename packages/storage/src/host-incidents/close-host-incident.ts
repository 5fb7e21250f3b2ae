import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

export type HostIncidentCloseResult =
  | { kind: "closed" }
  | { kind: "not_found" }
  | { kind: "conflict"; state: "open" | "closed"; revision: number };

/**
 * Closes an open incident at the revision the operator read (a conditional write on `state =
 * 'open' AND revision = expected`). Admission is left as it stands (rule 6): nothing here
 * touches the host. Run it in the transaction that audits it.
 */
export async function closeHostIncident(
  trx: Kysely<Database>,
  input: { hostId: string; incidentId: string; expectedRevision: number; actor: string; now: Date },
): Promise<HostIncidentCloseResult> {
  const closed = await trx
    .updateTable("host_incidents")
    .set({
      state: "closed",
      closed_at: formatTimestamp(input.now),
      closed_by: input.actor,
      awaiting_operator: 0,
      awaiting_reason: null,
      revision: sql<number>`revision + 1`,
    })
    .where("id", "=", input.incidentId)
    .where("host_id", "=", input.hostId)
    .where("state", "=", "open")
    .where("revision", "=", input.expectedRevision)
    .executeTakeFirst();
  if (Number(closed.numUpdatedRows) > 0) return { kind: "closed" };
  const current = await trx
    .selectFrom("host_incidents")
    .select(["state", "revision"])
    .where("id", "=", input.incidentId)
    .where("host_id", "=", input.hostId)
    .executeTakeFirst();
  if (current === undefined) return { kind: "not_found" };
  return { kind: "conflict", state: current.state, revision: Number(current.revision) };
}
