import { type Kysely, sql } from "kysely";
import { awaitingApprovalReason } from "../host-recovery/begin-host-recovery-step.js";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

export type DestructiveApprovalResult =
  | { kind: "approved"; approvedBy: string; approvedAt: string; newly: boolean }
  | { kind: "not_found" }
  | { kind: "conflict"; detail: string };

/**
 * Records an approval naming host, incident and destructive step (rule 5). An approval already
 * recorded is returned as it stands; a closed incident takes none (`conflict`). When the
 * incident was awaiting its operator for this very step, it no longer does.
 */
export async function approveDestructiveStep(
  trx: Kysely<Database>,
  input: { hostId: string; incidentId: string; step: string; actor: string; now: Date },
): Promise<DestructiveApprovalResult> {
  const incident = await trx
    .selectFrom("host_incidents")
    .select(["state", "awaiting_reason"])
    .where("id", "=", input.incidentId)
    .where("host_id", "=", input.hostId)
    .executeTakeFirst();
  if (incident === undefined) return { kind: "not_found" };
  const existing = await trx
    .selectFrom("host_incident_approvals")
    .selectAll()
    .where("incident_id", "=", input.incidentId)
    .where("step", "=", input.step)
    .executeTakeFirst();
  if (existing !== undefined) {
    return { kind: "approved", approvedBy: existing.approved_by, approvedAt: existing.approved_at, newly: false };
  }
  if (incident.state !== "open") {
    return { kind: "conflict", detail: `incident ${input.incidentId} is closed; an approval names an open incident` };
  }
  const approvedAt = formatTimestamp(input.now);
  await trx
    .insertInto("host_incident_approvals")
    .values({
      incident_id: input.incidentId,
      step: input.step,
      host_id: input.hostId,
      approved_by: input.actor,
      approved_at: approvedAt,
    })
    .execute();
  const waitedForThis = incident.awaiting_reason === awaitingApprovalReason(input.step);
  await trx
    .updateTable("host_incidents")
    .set({
      revision: sql<number>`revision + 1`,
      ...(waitedForThis ? { awaiting_operator: 0, awaiting_reason: null } : {}),
    })
    .where("id", "=", input.incidentId)
    .execute();
  return { kind: "approved", approvedBy: input.actor, approvedAt, newly: true };
}
