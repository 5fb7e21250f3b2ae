import type { Kysely } from "kysely";
import type { Storage } from "../dialect.js";
import { inTransaction } from "../executor.js";
import type { Database, LineageState } from "../schema.js";
import { formatTimestamp } from "../timestamps.js";
import { type LineageRow, liveLineageBytes } from "./lineage-row.js";

export interface LineageSave {
  readonly tenantId: string;
  readonly repository: string;
  readonly class: string;
  /** The host's lineage identity. */
  readonly lineage: string;
  readonly host: string;
  readonly bytes: number;
  /** The host-side generation the save created. */
  readonly generation: number;
  /**
   * The generation at which the saved state's chain started cold: the save descends from
   * every generation from this one to `generation`, and from none before it.
   */
  readonly rootGeneration: number;
  /**
   * What the saved dependency builds were compiled with (find-lineage-seeds.ts); a lineage
   * saved without one is never offered as a seed.
   */
  readonly seedContext?: string | null;
  readonly now: Date;
  /** The tenant's storage quota. */
  readonly quotaBytes: number;
}

export interface LineageSaveResult {
  /** The lineage's state after the save (a save descending from a dropped generation stays dropped). */
  readonly state: LineageState;
  /** Lineages evicted to bring the tenant back under its quota, least recently used first. */
  readonly evicted: readonly LineageRow[];
}

/**
 * Records what a finished attempt saved of its lineage, then enforces the tenant's storage
 * quota, in one transaction.
 *
 * The rule for a purged or evicted lineage (its row holds the generation that was dropped):
 * a save whose chain started cold after that generation (`rootGeneration > generation`)
 * revives it as live; a save descending from the dropped state (an attempt that was already
 * running warm when the purge or eviction happened) does not, and the row keeps its state
 * with the newer generation, so the host drops that one too before the next job.
 * A report older than the row (same host, generation not newer) only refreshes last use.
 *
 * The quota: when the tenant's live lineages hold more than `quotaBytes`, the least recently
 * used ones (last_used_at, then identity) are evicted until they hold no more than it; the
 * just-saved lineage is the most recent, so it goes last, and alone over quota it goes too.
 *
 * Locking: every step reads then writes the tenant's lineages. On SQLite the transaction
 * holds the database-wide write lock from its start; on PostgreSQL the tenant's row is locked
 * `FOR UPDATE` first, so two finishes of one tenant account one after the other (and never
 * both evict for the same excess).
 */
export async function recordLineageSave(
  storage: Storage,
  input: LineageSave,
  /** The caller's transaction to join (a finishing attempt accounts its save with its settlement). */
  within?: Kysely<Database>,
): Promise<LineageSaveResult> {
  const now = formatTimestamp(input.now);
  return inTransaction(within ?? storage, async (trx) => {
    if (storage.capabilities.rowLocks) {
      await trx.selectFrom("tenants").select("id").where("id", "=", input.tenantId).forUpdate().executeTakeFirst();
    }
    const existing = await trx
      .selectFrom("lineages")
      .selectAll()
      .where("tenant_id", "=", input.tenantId)
      .where("lineage", "=", input.lineage)
      .executeTakeFirst();
    let state: LineageState = "live";
    if (existing === undefined) {
      await trx
        .insertInto("lineages")
        .values({
          tenant_id: input.tenantId,
          lineage: input.lineage,
          repository: input.repository,
          class: input.class,
          bytes: input.bytes,
          last_used_at: now,
          host: input.host,
          state: "live",
          generation: input.generation,
          state_changed_at: now,
          seed_context: input.seedContext ?? null,
        })
        .execute();
    } else if (existing.host === input.host && input.generation <= existing.generation) {
      state = existing.state;
      if (existing.last_used_at < now) {
        await trx
          .updateTable("lineages")
          .set({ last_used_at: now })
          .where("tenant_id", "=", input.tenantId)
          .where("lineage", "=", input.lineage)
          .execute();
      }
    } else {
      const dropped = existing.state !== "live" && input.rootGeneration <= existing.generation;
      state = dropped ? existing.state : "live";
      await trx
        .updateTable("lineages")
        .set({
          bytes: input.bytes,
          last_used_at: now,
          host: input.host,
          state,
          generation: input.generation,
          seed_context: input.seedContext ?? null,
          ...(state === existing.state ? {} : { state_changed_at: now }),
        })
        .where("tenant_id", "=", input.tenantId)
        .where("lineage", "=", input.lineage)
        .execute();
    }

    const evicted: LineageRow[] = [];
    let total = await liveLineageBytes(trx, input.tenantId);
    if (total > input.quotaBytes) {
      const live = await trx
        .selectFrom("lineages")
        .selectAll()
        .where("tenant_id", "=", input.tenantId)
        .where("state", "=", "live")
        .orderBy("last_used_at")
        .orderBy("lineage")
        .execute();
      for (const row of live) {
        if (total <= input.quotaBytes) break;
        await trx
          .updateTable("lineages")
          .set({ state: "evicted", state_changed_at: now })
          .where("tenant_id", "=", input.tenantId)
          .where("lineage", "=", row.lineage)
          .execute();
        total -= row.bytes;
        evicted.push({ ...row, state: "evicted", state_changed_at: now });
        if (row.lineage === input.lineage) state = "evicted";
      }
    }
    return { state, evicted };
  });
}
