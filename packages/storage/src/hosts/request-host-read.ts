import { executorOf, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";

/** Records an operator's read of a host, pending until the host answers it on a fleet poll. */
export async function requestHostRead(
  target: StorageOrTransaction,
  input: {
    id: string;
    hostId: string;
    kind: string;
    path: string | null;
    maxBytes: number;
    /** evidence_export: the attempt whose retained files to include, and the most unit executions. */
    attempt?: number | null;
    executions?: number | null;
    requestedBy: string;
    now: Date;
  },
): Promise<void> {
  await executorOf(target)
    .insertInto("host_reads")
    .values({
      id: input.id,
      host_id: input.hostId,
      kind: input.kind,
      path: input.path,
      max_bytes: input.maxBytes,
      attempt: input.attempt ?? null,
      executions: input.executions ?? null,
      requested_by: input.requestedBy,
      requested_at: formatTimestamp(input.now),
      state: "pending",
      answered_at: null,
      content: null,
      truncated: null,
      detail: null,
      refusal: null,
    })
    .execute();
}
