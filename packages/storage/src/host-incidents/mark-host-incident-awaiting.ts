import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Records whether an open incident awaits its operator and why (null: it does not), moving its
 * revision on only when that changes.
 */
export async function markHostIncidentAwaiting(
  target: StorageOrTransaction,
  input: { incidentId: string; reason: string | null },
): Promise<boolean> {
  const awaiting = input.reason === null ? 0 : 1;
  const changed = await executorOf(target)
    .updateTable("host_incidents")
    .set({ awaiting_operator: awaiting, awaiting_reason: input.reason, revision: sql<number>`revision + 1` })
    .where("id", "=", input.incidentId)
    .where("state", "=", "open")
    .where((eb) =>
      eb.or([
        eb("awaiting_operator", "!=", awaiting),
        input.reason === null
          ? eb("awaiting_reason", "is not", null)
          : eb.or([eb("awaiting_reason", "is", null), eb("awaiting_reason", "!=", input.reason)]),
      ]),
    )
    .executeTakeFirst();
  return Number(changed.numUpdatedRows) > 0;
}
