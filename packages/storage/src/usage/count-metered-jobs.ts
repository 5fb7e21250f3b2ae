import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";

/** Distinct jobs with a settled attempt, in the period and per UTC day and repository of the attempts. */
export interface MeteredJobCounts {
  readonly total: number;
  /** `YYYY-MM-DD` (the day an attempt started) → jobs. */
  readonly byDay: ReadonlyMap<string, number>;
  readonly byRepository: ReadonlyMap<string, number>;
}

/**
 * Counts, in the database, the distinct jobs the metering records of listMeteredAttempts (same
 * filters: the tenant's attempts started in [from, to) and settled by `settledBy`) belong to —
 * so the usage summary never holds a set of job ids, only one count per day and repository.
 */
export async function countMeteredJobs(
  target: StorageOrTransaction,
  input: { tenantId: string; from: string; to: string; settledBy: string },
): Promise<MeteredJobCounts> {
  const db = executorOf(target);
  const day = sql<string>`substr(a.started_at, 1, 10)`;
  const base = () =>
    db
      .selectFrom("attempts as a")
      .crossJoin("jobs as j")
      .whereRef("j.id", "=", "a.job_id")
      .where("j.tenant_id", "=", input.tenantId)
      .where("a.started_at", ">=", input.from)
      .where("a.started_at", "<", input.to)
      .where("a.finished_at", "<=", input.settledBy);
  const jobs = sql<number | string>`count(distinct a.job_id)`;
  const [total, byDay, byRepository] = await Promise.all([
    base().select(jobs.as("n")).executeTakeFirst(),
    base()
      .select([day.as("key"), jobs.as("n")])
      .groupBy(day)
      .execute(),
    base()
      .select(["j.repository as key", jobs.as("n")])
      .groupBy("j.repository")
      .execute(),
  ]);
  // PostgreSQL's count is a bigint, which pg returns as text.
  return {
    total: Number(total?.n ?? 0),
    byDay: new Map(byDay.map((r) => [r.key, Number(r.n)])),
    byRepository: new Map(byRepository.map((r) => [r.key, Number(r.n)])),
  };
}
