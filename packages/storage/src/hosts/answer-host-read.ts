import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/**
 * Records a host's answer to one of its pending reads: a conditional write on
 * `host_id = host AND state = 'pending'`, so an answer to another host's read, a second answer,
 * or one after the wait expired changes nothing (`stale`).
 */
export async function answerHostRead(
  target: StorageOrTransaction,
  input: {
    id: string;
    hostId: string;
    outcome: "answered" | "failed";
    content: string;
    truncated: boolean;
    detail: string;
    refusal: "not_found" | "conflict" | null;
    now: Date;
  },
): Promise<"accepted" | "stale"> {
  const moved = await executorOf(target)
    .updateTable("host_reads")
    .set({
      state: input.outcome,
      answered_at: formatTimestamp(input.now),
      content: input.outcome === "answered" ? input.content : null,
      truncated: input.truncated ? 1 : 0,
      detail: input.detail,
      refusal: input.refusal,
    })
    .where("id", "=", input.id)
    .where("host_id", "=", input.hostId)
    .where("state", "=", "pending")
    .executeTakeFirst();
  return moved.numUpdatedRows === 0n ? "stale" : "accepted";
}
