import { type Insertable, type Kysely, sql } from "kysely";
import type { Database, NewJob, Storage } from "../src/index.js";
import type { JobsTable } from "../src/schema.js";

/**
 * The row of a queued, not yet admitted `cargo test --workspace` of acme/widget on kiln2-cpu, as
 * the storage tests insert it. The caller names what makes each job its own: id, submission
 * key, request hash and queue time; `overrides` changes any other column.
 */
export function queuedJob(
  unique: { id: string; tenant: string; submissionKey: string; requestHash: string; queuedAt: string },
  overrides: Partial<NewJob> = {},
): NewJob {
  return {
    id: unique.id,
    tenant_id: unique.tenant,
    repository: "acme/widget",
    branch: "main",
    base_commit: "0123456789abcdef0123456789abcdef01234567",
    head_sha: null,
    size: "kiln2-cpu",
    class: "test:stable:kiln2-cpu",
    description: "cargo test --workspace",
    status: "queued",
    submitted_by: "u_test",
    submission_key: unique.submissionKey,
    request_hash: unique.requestHash,
    invocation: JSON.stringify({ operation: "test", arguments: [] }),
    source_manifest: "[]",
    wall_clock_seconds: 3600,
    max_attempts: 3,
    attempts_started: 0,
    accepted_at: unique.queuedAt,
    queued_at: unique.queuedAt,
    admitted: null,
    retry_of: null,
    ...overrides,
  };
}

/**
 * Inserts a job's row as a schema before migration 0042 held it (the manifest in the row), for
 * tests that migrate down to an earlier schema and insert what a server of that time stored.
 */
export async function insertJobRowBefore0042(db: Kysely<Database>, row: NewJob): Promise<void> {
  const { source_manifest: manifest, ...columns } = row;
  if (typeof manifest !== "string") throw new Error("a row before 0042 holds its manifest's text");
  await (db as unknown as Kysely<Record<string, Record<string, unknown>>>)
    .insertInto("jobs")
    .values({ ...columns, source_manifest: manifest })
    .execute();
}

/** A new job's row alone, for tests that write the jobs table directly (no manifest row: nothing places these jobs). */
export function jobRowOf(job: NewJob): Insertable<JobsTable> {
  const { source_manifest: _manifest, ...row } = job;
  return row;
}

/**
 * The bytes the jobs table takes: on SQLite its b-tree's pages with their overflow pages
 * (dbstat), on PostgreSQL the table with its TOAST, after a vacuum (so dead rows do not count).
 */
export async function jobsTableBytes(storage: Storage): Promise<number> {
  if (storage.dialect === "sqlite") {
    const rows = await sql<{ bytes: number }>`select sum(pgsize) as bytes from dbstat where name = 'jobs'`.execute(
      storage.db,
    );
    return Number(rows.rows[0]?.bytes);
  }
  await sql`vacuum jobs`.execute(storage.db);
  const rows = await sql<{ bytes: number }>`select pg_table_size('jobs')::integer as bytes`.execute(storage.db);
  return Number(rows.rows[0]?.bytes);
}
