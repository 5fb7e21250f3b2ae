import type { Kysely } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

/** One change of a host as operator.hosts.history shows it. */
export interface HostTransitionInput {
  hostId: string;
  from: string;
  to: string;
  /** The operation or automatic action that moved it, e.g. `operator.hosts.drain`. */
  action: string;
  actor: string;
  at: Date;
  reason: string | null;
  /** The host revision the change moved it to; null when it has no host row (not yet enrolled). */
  revision: number | null;
}

/** Records a host transition; run it in the transaction that makes the change. */
export async function recordHostTransition(trx: Kysely<Database>, input: HostTransitionInput): Promise<void> {
  await trx
    .insertInto("host_transitions")
    .values({
      host_id: input.hostId,
      from_state: input.from,
      to_state: input.to,
      action: input.action,
      actor: input.actor,
      at: formatTimestamp(input.at),
      reason: input.reason,
      revision: input.revision,
    })
    .execute();
}
