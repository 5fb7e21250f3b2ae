import { type Insertable, type Kysely, sql } from "kysely";
import type { Database, NewJob, Storage } from "../src/index.js";
import type { JobsTable } from "../src/schema.js";

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
