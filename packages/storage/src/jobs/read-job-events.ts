import type { Selectable } from "kysely";
import type { Storage } from "../dialect.js";
import type { JobEventsTable } from "../schema.js";

export type JobEventRow = Selectable<JobEventsTable>;

/**
 * The tenant's job events with a sequence greater than `afterSequence`, in sequence
 * order: the durable feed cli.events and the dashboard stream resume from. Sequences are
 * the tenant's own, and a tenant's events are numbered in the order they commit (migration
 * 0030: on PostgreSQL at commit, holding the tenant's counter row to its end), so resuming
 * from the last sequence delivered never skips an event that commits later and never repeats
 * one. No lock is needed to read.
 */
export async function readJobEvents(
  storage: Storage,
  input: { tenantId: string; afterSequence: number; limit: number },
): Promise<JobEventRow[]> {
  return storage.db
    .selectFrom("job_events")
    .selectAll()
    .where("tenant_id", "=", input.tenantId)
    .where("sequence", ">", input.afterSequence)
    .orderBy("sequence")
    .limit(input.limit)
    .execute();
}

/** The tenant's highest job event sequence committed so far; 0 when it has none. */
export async function latestJobEventSequence(storage: Storage, tenantId: string): Promise<number> {
  const counter = await storage.db
    .selectFrom("job_event_counters")
    .select("last_sequence")
    .where("tenant_id", "=", tenantId)
    .executeTakeFirst();
  return Number(counter?.last_sequence ?? 0);
}
