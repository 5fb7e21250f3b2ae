import type { Kysely } from "kysely";
import type { Database } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";

/** One entry of a receipt: what the operation recorded, and when. */
export interface HostReceiptEntry {
  kind: string;
  detail: string;
  at: string;
}

/** Records a finished host operation's receipt; run it in the transaction of the change it records. */
export async function recordHostReceipt(
  trx: Kysely<Database>,
  input: {
    id: string;
    hostId: string;
    kind: "deployment" | "initialization" | "reap";
    /** The placement a reap receipt is for. */
    placement: { jobId: string; vmId: string } | null;
    actor: string;
    at: Date;
    summary: string;
    entries: readonly HostReceiptEntry[];
  },
): Promise<void> {
  await trx
    .insertInto("host_receipts")
    .values({
      id: input.id,
      host_id: input.hostId,
      kind: input.kind,
      job_id: input.placement?.jobId ?? null,
      vm_id: input.placement?.vmId ?? null,
      actor: input.actor,
      at: formatTimestamp(input.at),
      summary: input.summary,
      entries: JSON.stringify(input.entries),
    })
    .execute();
}
