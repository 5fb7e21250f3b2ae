import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type HostIncidentRecord, incidentRecordOf } from "./host-incident-records.js";

/** One incident of a host, with its approvals; undefined when the host has no such incident. */
export async function readHostIncident(
  target: StorageOrTransaction,
  input: { hostId: string; incidentId: string },
): Promise<HostIncidentRecord | undefined> {
  const db = executorOf(target);
  const row = await db
    .selectFrom("host_incidents")
    .selectAll()
    .where("id", "=", input.incidentId)
    .where("host_id", "=", input.hostId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  const approvals = await db
    .selectFrom("host_incident_approvals")
    .selectAll()
    .where("incident_id", "=", row.id)
    .orderBy("approved_at")
    .execute();
  return incidentRecordOf(row, approvals);
}

/** The host's open incident (at most one is open at a time), or undefined. */
export async function readOpenHostIncident(
  target: StorageOrTransaction,
  hostId: string,
): Promise<HostIncidentRecord | undefined> {
  const open = await executorOf(target)
    .selectFrom("host_incidents")
    .select("id")
    .where("host_id", "=", hostId)
    .where("state", "=", "open")
    .orderBy("opened_at", "desc")
    .executeTakeFirst();
  return open === undefined ? undefined : readHostIncident(target, { hostId, incidentId: open.id });
}
