import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import type { InitializationLedgerStep } from "./host-initialization-record.js";
import { recordHostReceipt } from "./record-host-receipt.js";
import { recordHostTransition } from "./record-host-transition.js";

/**
 * Records the step ledger a host reported for its open initialization: a conditional write on
 * `state IN ('pending', 'running')` of that host's operation, so a report for another host's
 * or a finished operation changes nothing (`stale`). A finished one (`succeeded` or `failed`)
 * also records the host's transition back and an `initialization` receipt naming every step.
 * Run it in one transaction.
 */
export async function reportHostInitialization(
  trx: Kysely<Database>,
  input: {
    hostId: string;
    operation: string;
    state: "running" | "succeeded" | "failed";
    steps: readonly InitializationLedgerStep[];
    failure: string | null;
    receiptId: string;
    now: Date;
  },
): Promise<"accepted" | "stale"> {
  const now = formatTimestamp(input.now);
  const finished = input.state !== "running";
  const moved = await trx
    .updateTable("host_initializations")
    .set({
      state: input.state,
      steps: JSON.stringify(input.steps),
      failure: input.failure,
      finished_at: finished ? now : null,
    })
    .where("operation", "=", input.operation)
    .where("host_id", "=", input.hostId)
    .where("state", "in", ["pending", "running"])
    .returning(["started_by"])
    .executeTakeFirst();
  if (moved === undefined) return "stale";
  if (!finished) return "accepted";

  const actor = `host:${input.hostId}`;
  const host = await trx
    .updateTable("hosts")
    .set({
      revision: sql<number>`revision + 1`,
      last_actor: actor,
      last_action: "host.initialization.finish",
      last_at: now,
      last_reason: input.failure,
    })
    .where("id", "=", input.hostId)
    .returning(["state", "revision"])
    .executeTakeFirst();
  await recordHostTransition(trx, {
    hostId: input.hostId,
    from: "initializing",
    to: input.state === "succeeded" ? (host?.state ?? "unenrolled") : "initialization_failed",
    action: "host.initialization.finish",
    actor,
    at: input.now,
    reason: `initialization ${input.operation} ${input.state}${input.failure === null ? "" : `: ${input.failure}`}`,
    revision: host === undefined ? null : Number(host.revision),
  });
  await recordHostReceipt(trx, {
    id: input.receiptId,
    hostId: input.hostId,
    kind: "initialization",
    placement: null,
    actor,
    at: input.now,
    summary: `initialization ${input.operation} ${input.state} (started by ${moved.started_by})`,
    entries: input.steps.map((s) => ({
      kind: `${s.step}:${s.state}`,
      detail: s.detail ?? "",
      at: s.finished_at ?? s.started_at ?? now,
    })),
  });
  return "accepted";
}
