import { executorOf, type StorageOrTransaction } from "../executor.js";
import { type CanaryRecord, canaryRecordOf } from "./canary-record.js";

/** The canary a job was submitted as, or undefined when the job is no canary. */
export async function findCanaryByJob(target: StorageOrTransaction, jobId: string): Promise<CanaryRecord | undefined> {
  const row = await executorOf(target)
    .selectFrom("canaries as c")
    .leftJoin("jobs as j", "j.id", "c.job_id")
    .selectAll("c")
    .select(["j.status as status", "j.finished_at as finished_at", "j.attempts_started as attempts_started"])
    .where("c.job_id", "=", jobId)
    .executeTakeFirst();
  return row === undefined ? undefined : canaryRecordOf(row, row);
}
