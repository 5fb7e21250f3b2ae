import { type CanaryRecord, canaryRecordOf } from "../canaries/canary-record.js";
import { executorOf, type StorageOrTransaction } from "../executor.js";

/**
 * Every canary the platform reserved for the probe tenant — each one a probe due at its
 * reservation, whether or not it became a job — with its job's status and finish once it is
 * one, oldest first. The trial accounts its probes from these (rule 11) rather than from the
 * jobs alone, so a probe whose job never ran is still due. Mutates nothing.
 */
export async function listTrialProbeReservations(
  target: StorageOrTransaction,
  input: { tenantId: string },
): Promise<CanaryRecord[]> {
  const rows = await executorOf(target)
    .selectFrom("canaries as c")
    .leftJoin("jobs as j", "j.id", "c.job_id")
    .selectAll("c")
    .select(["j.status as status", "j.finished_at as finished_at", "j.attempts_started as attempts_started"])
    .where("c.tenant_id", "=", input.tenantId)
    .orderBy("c.created_at")
    .orderBy("c.id")
    .execute();
  return rows.map((r) => canaryRecordOf(r, r));
}
