import { type Kysely, type Migration, sql } from "kysely";
import type { DialectName } from "../dialect.js";

/**
 * Per-tenant job event sequences (issue 22, L6). `job_events.sequence` was one identity over
 * every tenant, so the gaps between a tenant's own cli.events ids counted other tenants' job
 * moves. Now:
 *
 * - the platform-wide identity is renamed `id`: the row's own key, never shown to anyone;
 * - `sequence` is the tenant's own counter, the id cli.events sends and resumes from, unique
 *   per tenant (`job_events_tenant_sequence`, which is also the feed's read order);
 * - `job_event_counters` holds each tenant's last sequence, and a trigger numbers each event
 *   from it, so record-transition.ts inserts events as before and no verb can number one.
 *
 * The numbering must follow commit order within a tenant, or a reader that saw n could resume
 * past an n − 1 that commits later. On SQLite one writer at a time orders everything, so the
 * trigger numbers the event as it is inserted. On PostgreSQL the trigger is a constraint
 * trigger deferred to commit: the event is inserted unnumbered (NULL, which no reader's
 * `sequence > after` matches, and invisible to others until commit anyway), and numbered while
 * its transaction commits. The counter row stays locked from there to the end of the commit, so
 * two transactions of one tenant take their numbers in the order they commit — and nothing
 * else waits: a transaction holds no per-tenant lock while it works (two claims of one tenant's
 * jobs still never wait for each other, claim-next-job.ts). Deferred triggers fire in the order
 * their events were queued, so a transaction's own events are numbered in insertion order; a
 * rolled-back transaction numbers nothing and leaves no gap.
 *
 * Events written before keep their number as their tenant's sequence, and each counter starts
 * at its tenant's highest, so an id a client received before the upgrade still resumes exactly
 * after it (a tenant's old numbers are increasing, only not dense); moves made from now on are
 * numbered per tenant.
 */
export function jobEventTenantSequence(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex("job_events_by_tenant").execute();
      await db.schema.alterTable("job_events").renameColumn("sequence", "id").execute();
      await db.schema.alterTable("job_events").addColumn("sequence", "bigint").execute();
      await sql`update job_events set sequence = id`.execute(db);
      await db.schema
        .createIndex("job_events_tenant_sequence")
        .on("job_events")
        .columns(["tenant_id", "sequence"])
        .unique()
        .execute();
      await db.schema
        .createTable("job_event_counters")
        .addColumn("tenant_id", "text", (c) => c.primaryKey())
        .addColumn("last_sequence", "bigint", (c) => c.notNull())
        .execute();
      await sql`
        insert into job_event_counters (tenant_id, last_sequence)
        select tenant_id, max(sequence) from job_events group by tenant_id
      `.execute(db);
      if (dialect === "postgres") {
        await sql`
          create function number_job_event() returns trigger language plpgsql as $$
          declare
            next bigint;
          begin
            insert into job_event_counters (tenant_id, last_sequence) values (new.tenant_id, 1)
              on conflict (tenant_id) do update set last_sequence = job_event_counters.last_sequence + 1
              returning last_sequence into next;
            update job_events set sequence = next where id = new.id;
            return null;
          end
          $$
        `.execute(db);
        await sql`
          create constraint trigger job_events_numbered_at_commit after insert on job_events
            deferrable initially deferred for each row execute function number_job_event()
        `.execute(db);
      } else {
        await sql`
          create trigger job_events_numbered after insert on job_events for each row begin
            insert or ignore into job_event_counters (tenant_id, last_sequence) values (new.tenant_id, 0);
            update job_event_counters set last_sequence = last_sequence + 1 where tenant_id = new.tenant_id;
            update job_events
              set sequence = (select last_sequence from job_event_counters where tenant_id = new.tenant_id)
              where id = new.id;
          end
        `.execute(db);
      }
    },
    async down(db: Kysely<unknown>): Promise<void> {
      if (dialect === "postgres") {
        await sql`drop trigger job_events_numbered_at_commit on job_events`.execute(db);
        await sql`drop function number_job_event()`.execute(db);
      } else {
        await sql`drop trigger job_events_numbered`.execute(db);
      }
      await db.schema.dropTable("job_event_counters").execute();
      await db.schema.dropIndex("job_events_tenant_sequence").execute();
      await db.schema.alterTable("job_events").dropColumn("sequence").execute();
      await db.schema.alterTable("job_events").renameColumn("id", "sequence").execute();
      await db.schema.createIndex("job_events_by_tenant").on("job_events").columns(["tenant_id", "sequence"]).execute();
    },
  };
}
