import { randomBytes } from "node:crypto";
import type { Selectable } from "kysely";
import type { HostRecoveriesTable, HostRecoveryStepsTable } from "../schema.js";

/** States of a recovery operation: the host operator claims a `recorded` one and runs it. */
export type HostRecoveryState = HostRecoveriesTable["state"];
/** A recovery is open (`recorded`) or running until it finishes; a second invocation returns it. */
export const OPEN_RECOVERY_STATES = ["recorded", "running"] as const;

/** The destructive steps (spec: reinstallation, partitioning, filesystem_operation); none runs unapproved. */
export const DESTRUCTIVE_RECOVERY_STEPS = ["reinstallation", "partitioning", "filesystem_operation"] as const;

export interface HostRecoveryStepRecord {
  position: number;
  step: string;
  destructive: boolean;
  state: HostRecoveryStepsTable["state"];
  startedAt: string | null;
  finishedAt: string | null;
  detail: string | null;
}

export interface HostRecoveryRecord {
  id: string;
  hostId: string;
  incidentId: string | null;
  request: string;
  surface: string;
  operator: string;
  rescueRead: boolean;
  rescueSshPublicKey: string | null;
  state: HostRecoveryState;
  invokedAt: string;
  holder: string | null;
  claimedAt: string | null;
  finishedAt: string | null;
  outcomeDetail: string | null;
  steps: HostRecoveryStepRecord[];
}

export function recoveryRecordOf(
  row: Selectable<HostRecoveriesTable>,
  steps: readonly Selectable<HostRecoveryStepsTable>[],
): HostRecoveryRecord {
  return {
    id: row.id,
    hostId: row.host_id,
    incidentId: row.incident_id,
    request: row.request,
    surface: row.surface,
    operator: row.operator,
    rescueRead: row.rescue_read === 1,
    rescueSshPublicKey: row.rescue_ssh_public_key,
    state: row.state,
    invokedAt: row.invoked_at,
    holder: row.holder,
    claimedAt: row.claimed_at,
    finishedAt: row.finished_at,
    outcomeDetail: row.outcome_detail,
    steps: steps.map((s) => ({
      position: Number(s.position),
      step: s.step,
      destructive: s.destructive === 1,
      state: s.state,
      startedAt: s.started_at,
      finishedAt: s.finished_at,
      detail: s.detail,
    })),
  };
}

/** Operation and incident identifiers: lower-case, within the spec's `[a-z0-9][a-z0-9-]{0,39}`. */
export function newHostOperationId(prefix: "rec" | "inc" | "pa"): string {
  return `${prefix}-${randomBytes(8).toString("hex")}`;
}
