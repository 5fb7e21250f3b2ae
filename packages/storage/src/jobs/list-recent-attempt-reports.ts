import { sql } from "kysely";
import { executorOf, type StorageOrTransaction } from "../executor.js";

/** One finished attempt with its stored report, as the advisories read them. */
export interface AttemptReportRow {
  readonly repository: string;
  readonly jobId: string;
  readonly attempt: number;
  readonly size: string;
  readonly class: string;
  /** JSON: the CargoInvocation as submitted. */
  readonly invocation: string;
  readonly acceptedAt: string;
  readonly finishedAt: string | null;
  readonly outcome: string | null;
  /** JSON: the host's report (see the server's domain/jobs/attempt-report.ts). */
  readonly report: string;
}

/**
 * The most recent finished attempts (with a report) of some of the tenant's repositories, at
 * most `perRepository` of each, newest first (by the job's acceptance, then attempt). One
 * statement, bounded however long the history: a window function ranks each repository's
 * attempts (jobs_by_repository serves the filter and order).
 */
export async function listRecentAttemptReports(
  target: StorageOrTransaction,
  input: { tenantId: string; repositories: readonly string[]; perRepository: number },
): Promise<AttemptReportRow[]> {
  if (input.repositories.length === 0 || input.perRepository < 1) return [];
  const db = executorOf(target);
  const rows = await db
    .selectFrom((eb) =>
      eb
        .selectFrom("attempts as a")
        .innerJoin("jobs as j", "j.id", "a.job_id")
        .select([
          "j.repository as repository",
          "j.id as job_id",
          "a.number as attempt",
          "j.size as size",
          "j.class as class",
          "j.invocation as invocation",
          "j.accepted_at as accepted_at",
          "a.finished_at as finished_at",
          "a.outcome as outcome",
          "a.report as report",
          sql<number>`row_number() over (partition by j.repository order by j.accepted_at desc, j.id desc, a.number desc)`.as(
            "recency",
          ),
        ])
        .where("j.tenant_id", "=", input.tenantId)
        .where("j.repository", "in", [...input.repositories])
        .where("a.state", "=", "finished")
        .where("a.report", "is not", null)
        .as("ranked"),
    )
    .selectAll()
    .where("recency", "<=", input.perRepository)
    .orderBy("repository")
    .orderBy("recency")
    .execute();
  return rows.map((r) => ({
    repository: r.repository,
    jobId: r.job_id,
    attempt: Number(r.attempt),
    size: r.size,
    class: r.class,
    invocation: r.invocation,
    acceptedAt: r.accepted_at,
    finishedAt: r.finished_at,
    outcome: r.outcome,
    report: r.report ?? "null",
  }));
}
