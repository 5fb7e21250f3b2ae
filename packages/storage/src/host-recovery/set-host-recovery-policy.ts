import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

export type HostRecoveryPolicyChange =
  | { kind: "changed"; automatic: boolean; revision: number; changedBy: string; changedAt: string }
  | { kind: "not_found" }
  | { kind: "conflict"; revision: number | null };

/**
 * Sets the host's recovery policy: a conditional write on the policy revision the operator read
 * (`expectedRevision`), or, with none named, on no policy being set yet. Run it in the
 * transaction that audits it.
 */
export async function setHostRecoveryPolicy(
  trx: Kysely<Database>,
  input: { hostId: string; automatic: boolean; expectedRevision: number | null; actor: string; now: Date },
): Promise<HostRecoveryPolicyChange> {
  const now = formatTimestamp(input.now);
  let update = trx
    .updateTable("hosts")
    .set({
      recovery_policy_automatic: input.automatic ? 1 : 0,
      recovery_policy_revision: sql<number>`recovery_policy_revision + 1`,
      recovery_policy_changed_by: input.actor,
      recovery_policy_changed_at: now,
    })
    .where("id", "=", input.hostId);
  update =
    input.expectedRevision === null
      ? update.where("recovery_policy_automatic", "is", null)
      : update
          .where("recovery_policy_automatic", "is not", null)
          .where("recovery_policy_revision", "=", input.expectedRevision);
  const moved = await update.returning(["recovery_policy_revision"]).executeTakeFirst();
  if (moved !== undefined) {
    return {
      kind: "changed",
      automatic: input.automatic,
      revision: Number(moved.recovery_policy_revision),
      changedBy: input.actor,
      changedAt: now,
    };
  }
  const current = await trx
    .selectFrom("hosts")
    .select(["recovery_policy_automatic", "recovery_policy_revision"])
    .where("id", "=", input.hostId)
    .executeTakeFirst();
  if (current === undefined) return { kind: "not_found" };
  return {
    kind: "conflict",
    revision: current.recovery_policy_automatic === null ? null : Number(current.recovery_policy_revision),
  };
}
