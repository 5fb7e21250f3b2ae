import { type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";
import { setColumnCompression } from "./0039-manifests-lz4.js";

/**
 * A job's source manifest moves out of its `jobs` row into `job_manifests`, a table of its own
 * that only what needs the manifest reads: the placement of an attempt, a retry, the blob sweep
 * (storage `jobs/job-manifests.ts`).
 *
 * A streamed archive's manifest is up to 250,000 entries, about 46 MB of JSON. SQLite keeps a
 * row's columns in order and reaches a column past a large one by walking that one's overflow
 * pages, so every read of a column after `source_manifest` (accepted_at, status times, failure:
 * what jobs.list, jobs.get and jobs.evidence show) walked the 46 MB: a jobs.list page holding
 * such a job cost 20–23 ms of the event loop against 5 ms without it, and under a flood of such
 * pages another tenant's requests waited seconds (issue 33). Selecting fewer columns does not
 * help; only a row that does not hold the manifest does. PostgreSQL keeps large values out of
 * line and was not slowed this way, but one schema serves both engines.
 *
 * The row references its job and goes with it (ON DELETE CASCADE). Existing manifests are moved;
 * on PostgreSQL the new column compresses with lz4 as `jobs.source_manifest` did (0039).
 */
export function jobManifests(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable("job_manifests")
        .addColumn("job_id", "text", (c) => c.primaryKey().references("jobs.id").onDelete("cascade"))
        .addColumn("manifest", "text", (c) => c.notNull())
        .execute();
      await setColumnCompression(db, dialect, [["job_manifests", "manifest"]], "lz4");
      await sql`insert into job_manifests (job_id, manifest) select id, source_manifest from jobs`.execute(db);
      // PostgreSQL drops a column without rewriting the rows: the values would stay in the
      // table's TOAST for as long as each row does. Emptied first, vacuum reclaims them. (SQLite
      // rewrites the rows as it drops the column.)
      if (dialect === "postgres") await sql`update jobs set source_manifest = ''`.execute(db);
      await db.schema.alterTable("jobs").dropColumn("source_manifest").execute();
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .alterTable("jobs")
        .addColumn("source_manifest", "text", (c) => c.notNull().defaultTo("[]"))
        .execute();
      await setColumnCompression(db, dialect, [["jobs", "source_manifest"]], "lz4");
      await sql`
        update jobs set source_manifest = (select m.manifest from job_manifests m where m.job_id = jobs.id)
        where exists (select 1 from job_manifests m where m.job_id = jobs.id)
      `.execute(db);
      await db.schema.dropTable("job_manifests").execute();
    },
  };
}
