import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import { type HostStateChange, settleHostChange } from "./host-drain.js";
import { recordHostReceipt } from "./record-host-receipt.js";
import { recordHostTransition } from "./record-host-transition.js";

/**
 * Records the release an operator says now runs on a host: a conditional write on the host row
 * (on `revision = expected` when the operator named the revision read), moving its revision on,
 * with a `deployment` transition and receipt. The host's serving state is left as it stands.
 * Run it in the transaction that audits it.
 */
export async function registerHostDeployment(
  trx: Kysely<Database>,
  input: {
    hostId: string;
    release: string;
    sha256: string | null;
    expectedRevision: number | null;
    actor: string;
    action: string;
    reason: string | null;
    receiptId: string;
    now: Date;
  },
): Promise<HostStateChange> {
  const now = formatTimestamp(input.now);
  let update = trx
    .updateTable("hosts")
    .set({
      deployed_release: input.release,
      deployed_release_sha256: input.sha256,
      deployed_at: now,
      revision: sql<number>`revision + 1`,
      last_actor: input.actor,
      last_action: input.action,
      last_at: now,
      last_reason: input.reason,
    })
    .where("id", "=", input.hostId);
  if (input.expectedRevision !== null) update = update.where("revision", "=", input.expectedRevision);
  const before = await trx
    .selectFrom("hosts")
    .select(["deployed_release"])
    .where("id", "=", input.hostId)
    .executeTakeFirst();
  const moved = await update.returningAll().executeTakeFirst();
  if (moved !== undefined) {
    await recordHostTransition(trx, {
      hostId: input.hostId,
      from: moved.state,
      to: moved.state,
      action: input.action,
      actor: input.actor,
      at: input.now,
      reason: `release ${before?.deployed_release ?? "(none)"} → ${input.release}${input.reason === null ? "" : `: ${input.reason}`}`,
      revision: Number(moved.revision),
    });
    await recordHostReceipt(trx, {
      id: input.receiptId,
      hostId: input.hostId,
      kind: "deployment",
      placement: null,
      actor: input.actor,
      at: input.now,
      summary: `release ${input.release} registered as deployed`,
      entries: [
        {
          kind: "release_registered",
          detail: `${input.release}${input.sha256 === null ? "" : ` (sha256 ${input.sha256})`}`,
          at: now,
        },
      ],
    });
  }
  return settleHostChange(trx, input.hostId, moved);
}
