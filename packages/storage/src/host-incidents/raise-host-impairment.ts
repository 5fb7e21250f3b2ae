import { type Kysely, sql } from "kysely";
import { newHostOperationId } from "../host-recovery/host-recovery-records.js";
import { hostPlacementSubject, JOB_CHANNELS, notifyAtCommit } from "../notifications/job-notices.js";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

export interface ImpairmentEvidence {
  kind: string;
  detail: string;
  reference?: string;
  observed_at?: string;
}

export type ImpairmentRaised =
  | {
      kind: "raised";
      incidentId: string;
      incidentOpened: boolean;
      /** null when this incident already holds an anomaly of this kind. */
      anomalyId: string | null;
      admissionClosed: boolean;
    }
  | { kind: "not_found" };

/** Why an incident of a host whose policy is not automatic awaits its operator. */
export const AUTOMATIC_RECOVERY_OFF_REASON =
  "automatic recovery is off for this host (or no policy is set); an operator invokes recovery";

/**
 * One impairment of a host, in one transaction: the host's open incident (a new one when none
 * is open — a later impairment after a close opens a new incident), a platform anomaly with its
 * evidence (one per incident and kind, so a persisting impairment is not raised again each
 * pass), and the host's admission closed (by `platform`, naming the impairment) when open.
 * With a policy that is not automatic the new incident awaits an operator at once (rule 4).
 *
 * Locking: the host row is read FOR UPDATE on PostgreSQL, ordering this against a recovery
 * invocation and against claims (which read it FOR SHARE): a claim after the commit sees the
 * closed admission. SQLite's single writer orders them already.
 */
export async function raiseHostImpairment(
  trx: Kysely<Database>,
  input: { hostId: string; kind: string; evidence: ImpairmentEvidence[]; now: Date },
  rowLocks: boolean,
): Promise<ImpairmentRaised> {
  const now = formatTimestamp(input.now);
  let hostQuery = trx
    .selectFrom("hosts")
    .select(["id", "admission_closed_at", "recovery_policy_automatic"])
    .where("id", "=", input.hostId);
  if (rowLocks) hostQuery = hostQuery.forUpdate();
  const host = await hostQuery.executeTakeFirst();
  if (host === undefined) return { kind: "not_found" };

  let incidentId: string;
  let incidentOpened = false;
  const open = await trx
    .selectFrom("host_incidents")
    .select("id")
    .where("host_id", "=", input.hostId)
    .where("state", "=", "open")
    .executeTakeFirst();
  if (open !== undefined) {
    incidentId = open.id;
  } else {
    incidentId = newHostOperationId("inc");
    incidentOpened = true;
    const automatic = host.recovery_policy_automatic !== null && Number(host.recovery_policy_automatic) === 1;
    await trx
      .insertInto("host_incidents")
      .values({
        id: incidentId,
        host_id: input.hostId,
        state: "open",
        opened_at: now,
        closed_at: null,
        closed_by: null,
        awaiting_operator: automatic ? 0 : 1,
        awaiting_reason: automatic ? null : AUTOMATIC_RECOVERY_OFF_REASON,
      })
      .execute();
  }

  let anomalyId: string | null = null;
  const existing = await trx
    .selectFrom("platform_anomalies")
    .select("id")
    .where("incident_id", "=", incidentId)
    .where("kind", "=", input.kind)
    .executeTakeFirst();
  if (existing === undefined) {
    anomalyId = newHostOperationId("pa");
    await trx
      .insertInto("platform_anomalies")
      .values({
        id: anomalyId,
        host_id: input.hostId,
        kind: input.kind,
        evidence: JSON.stringify(input.evidence),
        raised_at: now,
        incident_id: incidentId,
        disposition: null,
        disposition_note: null,
        disposed_by: null,
        disposed_at: null,
      })
      .execute();
  }

  const admissionClosed = host.admission_closed_at === null;
  if (admissionClosed) {
    await trx
      .updateTable("hosts")
      .set({
        admission_closed_by: "platform",
        admission_closed_at: now,
        admission_closure_reason: `${input.kind}: ${input.evidence.map((e) => e.detail).join("; ")}`,
        operation_revision: sql<number>`operation_revision + 1`,
      })
      .where("id", "=", input.hostId)
      .execute();
    // Ends the host's waiting claim, and releases jobs that waited for it as their lineage's host.
    await notifyAtCommit(trx, JOB_CHANNELS.placement, hostPlacementSubject(input.hostId));
  }
  return { kind: "raised", incidentId, incidentOpened, anomalyId, admissionClosed };
}
