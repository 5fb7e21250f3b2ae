import { sql } from "kysely";
import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";

export type StepBeginAnswer = { kind: "proceed" } | { kind: "await_approval"; reason: string } | { kind: "not_found" };

/** Why an incident awaits its operator while a destructive step waits (read back by approval). */
export function awaitingApprovalReason(step: string): string {
  return `destructive step ${step} awaits an approval naming host, incident and step`;
}

/**
 * The host operator asks to begin one step of a running recovery. A destructive step begins
 * only when an approval names this host, the recovery's incident and the step (rule 5);
 * otherwise it is recorded `awaiting_approval`, its incident awaits an operator saying why, and
 * the host operator is told to wait (it asks again on a later pass). Any other step begins.
 */
export async function beginHostRecoveryStep(
  storage: Storage,
  input: { hostId: string; recoveryId: string; position: number; now: Date },
): Promise<StepBeginAnswer> {
  return storage.transaction(async (trx) => {
    const recovery = await trx
      .selectFrom("host_recoveries")
      .select(["incident_id", "state"])
      .where("id", "=", input.recoveryId)
      .where("host_id", "=", input.hostId)
      .executeTakeFirst();
    if (recovery === undefined || recovery.state !== "running") return { kind: "not_found" };
    const step = await trx
      .selectFrom("host_recovery_steps")
      .selectAll()
      .where("recovery_id", "=", input.recoveryId)
      .where("position", "=", input.position)
      .executeTakeFirst();
    if (step === undefined) return { kind: "not_found" };
    if (Number(step.destructive) === 1) {
      const approval =
        recovery.incident_id === null
          ? undefined
          : await trx
              .selectFrom("host_incident_approvals")
              .select("step")
              .where("incident_id", "=", recovery.incident_id)
              .where("host_id", "=", input.hostId)
              .where("step", "=", step.step)
              .executeTakeFirst();
      if (approval === undefined) {
        const reason =
          recovery.incident_id === null
            ? `destructive step ${step.step} needs an approval naming an incident; this recovery answers none`
            : awaitingApprovalReason(step.step);
        await trx
          .updateTable("host_recovery_steps")
          .set({ state: "awaiting_approval", detail: reason })
          .where("recovery_id", "=", input.recoveryId)
          .where("position", "=", input.position)
          .execute();
        if (recovery.incident_id !== null) {
          await trx
            .updateTable("host_incidents")
            .set({ awaiting_operator: 1, awaiting_reason: reason, revision: sql<number>`revision + 1` })
            .where("id", "=", recovery.incident_id)
            .where((eb) => eb.or([eb("awaiting_reason", "is", null), eb("awaiting_reason", "!=", reason)]))
            .execute();
        }
        return { kind: "await_approval", reason };
      }
    }
    await trx
      .updateTable("host_recovery_steps")
      .set({ state: "running", started_at: step.started_at ?? formatTimestamp(input.now), detail: null })
      .where("recovery_id", "=", input.recoveryId)
      .where("position", "=", input.position)
      .execute();
    return { kind: "proceed" };
  });
}
