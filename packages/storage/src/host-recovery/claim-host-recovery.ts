import type { Storage } from "../dialect.js";
import { formatTimestamp } from "../timestamps.js";
import type { HostRecoveryRecord } from "./host-recovery-records.js";
import { withRecoverySteps } from "./read-host-recovery-steps.js";

/**
 * The host operator's claim: the host's recovery it should run now — one already running
 * (resumed, e.g. after a destructive step waited for its approval or the operator restarted),
 * else the oldest recorded one, moved to `running` and held by `instance`. The move is a
 * conditional write on `state = 'recorded'`, so two claims never both take one recovery.
 */
export async function claimHostRecovery(
  storage: Storage,
  input: { hostId: string; instance: string; now: Date },
): Promise<HostRecoveryRecord | undefined> {
  return storage.transaction(async (trx) => {
    const running = await trx
      .selectFrom("host_recoveries")
      .selectAll()
      .where("host_id", "=", input.hostId)
      .where("state", "=", "running")
      .orderBy("invoked_at")
      .executeTakeFirst();
    if (running !== undefined) {
      const resumed = await trx
        .updateTable("host_recoveries")
        .set({ holder: input.instance })
        .where("id", "=", running.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      return (await withRecoverySteps(trx, [resumed]))[0];
    }
    const recorded = await trx
      .selectFrom("host_recoveries")
      .select("id")
      .where("host_id", "=", input.hostId)
      .where("state", "=", "recorded")
      .orderBy("invoked_at")
      .executeTakeFirst();
    if (recorded === undefined) return undefined;
    const claimed = await trx
      .updateTable("host_recoveries")
      .set({ state: "running", holder: input.instance, claimed_at: formatTimestamp(input.now) })
      .where("id", "=", recorded.id)
      .where("state", "=", "recorded")
      .returningAll()
      .executeTakeFirst();
    return claimed === undefined ? undefined : (await withRecoverySteps(trx, [claimed]))[0];
  });
}
