import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type CanaryRecord, canaryRecordOf } from "./canary-record.js";

/**
 * The newest canaries of every host (at most `perHost` each, due at or after `since`), newest
 * first per host, with their jobs' status: what workload health and the platform's other
 * readers (host incidents) judge a host's end-to-end health by. One statement: a window
 * function ranks each host's canaries (canaries_by_host_slot serves it), bounded by `since`.
 */
export async function listCanaryOutcomes(
  target: StorageOrTransaction,
  input: { since: string; perHost: number },
): Promise<CanaryRecord[]> {
  const rows = await executorOf(target)
    .selectFrom((eb) =>
      eb
        .selectFrom("canaries as c")
        .leftJoin("jobs as j", "j.id", "c.job_id")
        .selectAll("c")
        .select([
          "j.status as status",
          "j.finished_at as finished_at",
          "j.attempts_started as attempts_started",
          sql<number>`row_number() over (partition by c.host_id order by c.due_at desc)`.as("recency"),
        ])
        .where("c.due_at", ">=", input.since)
        .as("ranked"),
    )
    .selectAll()
    .where("recency", "<=", input.perHost)
    .orderBy("host_id")
    .orderBy("due_at", "desc")
    .execute();
  return rows.map((r) => canaryRecordOf(r, r));
}
