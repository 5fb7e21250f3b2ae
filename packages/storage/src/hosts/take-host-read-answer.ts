import { inTransaction, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

export type HostReadAnswerState =
  | { kind: "pending" }
  | { kind: "expired" }
  | { kind: "answered"; content: string; truncated: boolean; detail: string; answeredAt: string }
  | { kind: "failed"; detail: string; refusal: string | null; answeredAt: string };

/**
 * The waiting request's look at its read. An answer is taken once: its bytes are cleared and the
 * read marked `delivered`. A read still pending at or after `deadline` is marked `expired` — a
 * conditional write on `state = 'pending'`, so an answer landing at the same moment is either
 * taken or finds the read expired (and is told `stale`), never both.
 */
export async function takeHostReadAnswer(
  target: StorageOrTransaction,
  input: { id: string; now: Date; deadline: Date },
): Promise<HostReadAnswerState> {
  return inTransaction(target, async (trx) => {
    const row = await trx.selectFrom("host_reads").selectAll().where("id", "=", input.id).executeTakeFirstOrThrow();
    if (row.state === "answered" || row.state === "failed") {
      const taken = await trx
        .updateTable("host_reads")
        .set({ state: "delivered", content: null })
        .where("id", "=", input.id)
        .where("state", "=", row.state)
        .executeTakeFirst();
      if (taken.numUpdatedRows === 0n) return { kind: "expired" };
      const answeredAt = row.answered_at ?? formatTimestamp(input.now);
      return row.state === "answered"
        ? {
            kind: "answered",
            content: row.content ?? "",
            truncated: row.truncated === 1,
            detail: row.detail ?? "",
            answeredAt,
          }
        : { kind: "failed", detail: row.detail ?? "", refusal: row.refusal, answeredAt };
    }
    if (row.state !== "pending") return { kind: "expired" };
    if (input.now.getTime() < input.deadline.getTime()) return { kind: "pending" };
    const expired = await trx
      .updateTable("host_reads")
      .set({ state: "expired" })
      .where("id", "=", input.id)
      .where("state", "=", "pending")
      .executeTakeFirst();
    return expired.numUpdatedRows === 0n ? { kind: "pending" } : { kind: "expired" };
  });
}
