import { type Kysely, sql } from "kysely";
import type { Database } from "../schema.js";

/**
 * The channels job writes notify on, and what each payload names. A notice only says "look
 * again": readers re-read the database, which stays the one source of truth, so a notice lost
 * (a dropped listening connection) costs latency, never correctness.
 */
export const JOB_CHANNELS = {
  /** A job's log grew or its status moved; payload: the job id (log streams). */
  job: "kiln_job",
  /** A job event was appended to a tenant's sequence; payload: the tenant id (cli.events, events.stream). */
  jobEvents: "kiln_job_events",
  /** A job became queued (submitted or handed back); payload: the job id (hosts waiting to claim). */
  queued: "kiln_job_queued",
  /**
   * Something other than a newly queued job may let a queued job be placed: a host's state
   * changed (drained, undrained, its admission closed or reopened — which also ends that host's
   * waiting claim, and releases jobs that waited for it as their lineage's host), or a tenant's
   * running slot freed or its controls changed. Payload: `host:<id>` or `tenant:<id>` (hosts
   * waiting to claim read the queue again whatever it names).
   */
  placement: "kiln_placement",
} as const;

/** The payload of a placement notice about a host. */
export const hostPlacementSubject = (hostId: string): string => `host:${hostId}`;
/** The payload of a placement notice about a tenant. */
export const tenantPlacementSubject = (tenantId: string): string => `tenant:${tenantId}`;

export type JobChannel = (typeof JOB_CHANNELS)[keyof typeof JOB_CHANNELS];

/**
 * Issues one notice on `db` — the writing transaction, so it is delivered when (and only if)
 * that transaction commits. On PostgreSQL this is `pg_notify` (identical notices of one
 * transaction are delivered once); SQLite has a function of the same name and meaning, defined
 * per connection by open-sqlite-storage.ts, that holds the notice until COMMIT and drops it on
 * ROLLBACK, so the verbs issue one statement on both engines. Outside a transaction the notice
 * goes at once (the statement before it has committed).
 */
export async function notifyAtCommit(db: Kysely<Database>, channel: JobChannel, payload: string): Promise<void> {
  await sql`select pg_notify(${channel}, ${payload})`.execute(db);
}
