import { executorOf, type StorageOrTransaction } from "../executor.js";
import { fetchKeysetPage, type KeysetPage } from "../pagination/keyset-page.js";

/** A job cancelled before placement: settled with no attempt and no usage. */
export interface UnplacedCancellationRow {
  readonly id: string;
  readonly repository: string;
  readonly finished_at: string;
  readonly cancel_requested_by: string | null;
}

/**
 * A page of a tenant's jobs cancelled before any attempt started, settled in [from, to) and by
 * `settledBy`, oldest first (keyset on finished_at, id).
 */
export async function listUnplacedCancellations(
  target: StorageOrTransaction,
  input: { tenantId: string; from: string; to: string; settledBy: string; limit: number; cursor?: string | null },
): Promise<KeysetPage<UnplacedCancellationRow>> {
  const db = executorOf(target);
  const query = db
    .selectFrom((eb) =>
      eb
        .selectFrom("jobs")
        .select(["id", "repository", "cancel_requested_by"])
        .select((s) => s.fn.coalesce("finished_at", s.val("")).as("finished_at"))
        .where("tenant_id", "=", input.tenantId)
        .where("status", "=", "cancelled")
        .where("attempts_started", "=", 0)
        .where("finished_at", ">=", input.from)
        .where("finished_at", "<", input.to)
        .where("finished_at", "<=", input.settledBy)
        .as("c"),
    )
    .selectAll();
  return fetchKeysetPage(query, {
    sort: [
      ["finished_at", "asc", "text"],
      ["id", "asc", "text"],
    ],
    limit: input.limit,
    cursor: input.cursor ?? null,
  });
}
