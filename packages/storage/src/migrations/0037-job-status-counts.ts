import { type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";

/**
 * Each tenant's jobs counted by status, kept as jobs are written (issue 22, H1: lists read only
 * what they return). jobs.list answers every page with the tenant's `total` and `summary`; it
 * counted them (`count(*) … group by status` over every job of the tenant) on every page, so a
 * page's cost grew with the tenant. Now `job_status_counts` holds one row per tenant and status,
 * and the page reads those few rows (list-jobs.ts).
 *
 * The counts are kept by triggers on `jobs` itself — a job inserted, its status changed, a job
 * deleted — so no writer can leave them behind: the verbs (insert-job.ts, claim-next-job.ts,
 * settle-job.ts, request-cancellation.ts, answer-lost-attempt.ts), a restore, a bench's bulk
 * copy and a future purge all move them in the transaction that moved the job. The backfill
 * counts the jobs there are.
 *
 * On SQLite one writer at a time orders everything, so the triggers run as the row is written.
 *
 * On PostgreSQL a counter row per tenant and status written by every move would be a lock every
 * transaction of the tenant holds until it ends: a claim would wait for a finish of another job
 * of the same tenant. So, as for the event numbering (migration 0030), the trigger is a
 * constraint trigger deferred to commit: each row's move is queued (with the row's old and new
 * version, so a job inserted and moved twice in one transaction counts each step) and applied
 * while the transaction commits. Nothing waits while transactions work; at commit the tenant's
 * counters are written in the short window in which the tenant's event counter is already
 * locked. The trigger takes that lock first (`job_event_counters`' row of the tenant, which 0030's
 * numbering of the move's event takes anyway): every commit of a tenant's moves then takes the
 * tenant's locks in one order — event counter, then status counters — and two commits of one
 * tenant cannot deadlock whatever statuses they move between; the second waits only for the
 * first's commit to finish, as it already did for its event's number. A rolled-back
 * transaction changes no count. A transaction that lists its own uncommitted moves would not see
 * them counted yet (no verb does).
 *
 * The page itself is a keyset read, newest first: unfiltered it walks `jobs_by_tenant` and reads
 * the rows it returns. A filter walked that same index and skipped every job that did not match,
 * so a page of a rare status, repository, branch or class (or one that matched nothing) read the
 * whole tenant. Each filter now has an index of its own in the page's order — (tenant_id, the
 * filtered column, accepted_at, id) — so a filtered page reads the jobs matching it, in order,
 * and stops at the page's end. Filters combined are served by the index of one of them (the
 * database's choice) and the others are checked on the rows it yields: the cost is then bounded
 * by the jobs matching that one filter, never by the tenant. The status index replaces
 * `jobs_tenant_status` (tenant_id, status), which it serves as a prefix (claim-next-job.ts counts
 * a tenant's running jobs over it).
 */
const LISTED_BY = ["status", "repository", "branch", "class"] as const;

/** The filtered listing's indexes (see above). */
async function createListingIndexes(db: Kysely<unknown>): Promise<void> {
  for (const column of LISTED_BY) {
    await db.schema
      .createIndex(`jobs_listed_by_${column}`)
      .on("jobs")
      .columns(["tenant_id", column, "accepted_at", "id"])
      .execute();
  }
  await db.schema.dropIndex("jobs_tenant_status").execute();
}

async function dropListingIndexes(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex("jobs_tenant_status").on("jobs").columns(["tenant_id", "status"]).execute();
  for (const column of LISTED_BY) await db.schema.dropIndex(`jobs_listed_by_${column}`).execute();
}

export function jobStatusCounts(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await createListingIndexes(db);
      await db.schema
        .createTable("job_status_counts")
        .addColumn("tenant_id", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("jobs", "bigint", (c) => c.notNull())
        .addPrimaryKeyConstraint("job_status_counts_pk", ["tenant_id", "status"])
        .execute();
      await sql`
        insert into job_status_counts (tenant_id, status, jobs)
        select tenant_id, status, count(*) from jobs group by tenant_id, status
      `.execute(db);
      if (dialect === "postgres") {
        await sql`
          create function count_job_status() returns trigger language plpgsql as $$
          declare
            tenant text;
          begin
            tenant := coalesce(new.tenant_id, old.tenant_id);
            insert into job_event_counters (tenant_id, last_sequence) values (tenant, 0)
              on conflict (tenant_id) do nothing;
            perform 1 from job_event_counters where tenant_id = tenant for no key update;
            if tg_op <> 'INSERT' then
              if old.tenant_id <> tenant then
                insert into job_event_counters (tenant_id, last_sequence) values (old.tenant_id, 0)
                  on conflict (tenant_id) do nothing;
                perform 1 from job_event_counters where tenant_id = old.tenant_id for no key update;
              end if;
              update job_status_counts set jobs = jobs - 1 where tenant_id = old.tenant_id and status = old.status;
            end if;
            if tg_op <> 'DELETE' then
              insert into job_status_counts (tenant_id, status, jobs) values (new.tenant_id, new.status, 1)
                on conflict (tenant_id, status) do update set jobs = job_status_counts.jobs + 1;
            end if;
            return null;
          end
          $$
        `.execute(db);
        await sql`
          create constraint trigger jobs_counted_at_commit_insert after insert on jobs
            deferrable initially deferred for each row execute function count_job_status()
        `.execute(db);
        await sql`
          create constraint trigger jobs_counted_at_commit_update after update of status, tenant_id on jobs
            deferrable initially deferred for each row
            when (old.status is distinct from new.status or old.tenant_id is distinct from new.tenant_id)
            execute function count_job_status()
        `.execute(db);
        await sql`
          create constraint trigger jobs_counted_at_commit_delete after delete on jobs
            deferrable initially deferred for each row execute function count_job_status()
        `.execute(db);
      } else {
        await sql`
          create trigger jobs_counted_insert after insert on jobs for each row begin
            insert into job_status_counts (tenant_id, status, jobs) values (new.tenant_id, new.status, 1)
              on conflict (tenant_id, status) do update set jobs = jobs + 1;
          end
        `.execute(db);
        await sql`
          create trigger jobs_counted_update after update of status, tenant_id on jobs for each row
            when old.status is not new.status or old.tenant_id is not new.tenant_id begin
            update job_status_counts set jobs = jobs - 1 where tenant_id = old.tenant_id and status = old.status;
            insert into job_status_counts (tenant_id, status, jobs) values (new.tenant_id, new.status, 1)
              on conflict (tenant_id, status) do update set jobs = jobs + 1;
          end
        `.execute(db);
        await sql`
          create trigger jobs_counted_delete after delete on jobs for each row begin
            update job_status_counts set jobs = jobs - 1 where tenant_id = old.tenant_id and status = old.status;
          end
        `.execute(db);
      }
    },
    async down(db: Kysely<unknown>): Promise<void> {
      if (dialect === "postgres") {
        for (const op of ["insert", "update", "delete"]) {
          await sql`drop trigger ${sql.raw(`jobs_counted_at_commit_${op}`)} on jobs`.execute(db);
        }
        await sql`drop function count_job_status()`.execute(db);
      } else {
        for (const op of ["insert", "update", "delete"]) {
          await sql`drop trigger ${sql.raw(`jobs_counted_${op}`)}`.execute(db);
        }
      }
      await db.schema.dropTable("job_status_counts").execute();
      await dropListingIndexes(db);
    },
  };
}
