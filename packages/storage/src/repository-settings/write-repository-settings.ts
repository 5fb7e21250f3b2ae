import { executorOf, inTransaction, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { readRepositorySettings } from "./read-repository-settings.js";

export interface RepositorySettingsChanges {
  readonly affectedTests?: boolean;
  readonly totalInjectionOptOut?: boolean;
  readonly wallClockCeilingSeconds?: number;
  readonly lineageSeeding?: boolean;
  readonly flakyRetries?: number;
  readonly flakyPolicy?: "pass" | "fail";
}

export type RepositorySettingsWriteResult =
  | { kind: "written"; version: number; changedAt: string }
  | { kind: "stale"; currentVersion: number }
  | { kind: "not_found" };

/**
 * A compare-and-set write: it applies only when `expectedVersion` is still the current
 * version, and moves the version by one. The first write inserts the row (version 0 → 1); two
 * first writes racing collide on the primary key, later ones on `where version = expected`,
 * so exactly one of two writers naming the same version wins and the other is told the
 * current version. Joins the caller's transaction (the keyed receipt commits with it).
 */
export async function writeRepositorySettings(
  target: StorageOrTransaction,
  input: {
    tenantId: string;
    repository: string;
    expectedVersion: number;
    changes: RepositorySettingsChanges;
    changedBy: string;
    now: Date;
  },
): Promise<RepositorySettingsWriteResult> {
  return inTransaction(target, async (tx) => {
    const current = await readRepositorySettings(tx, input);
    if (current === undefined) return { kind: "not_found" };
    if (current.version !== input.expectedVersion) return { kind: "stale", currentVersion: current.version };
    const changedAt = formatTimestamp(input.now);
    const values = {
      version: current.version + 1,
      affected_tests: toColumn(input.changes.affectedTests ?? current.affectedTests),
      total_injection_opt_out: toColumn(input.changes.totalInjectionOptOut ?? current.totalInjectionOptOut),
      wall_clock_ceiling_seconds: input.changes.wallClockCeilingSeconds ?? current.wallClockCeilingSeconds,
      lineage_seeding: toColumn(input.changes.lineageSeeding ?? current.lineageSeeding),
      flaky_retries: input.changes.flakyRetries ?? current.flakyRetries,
      flaky_policy: input.changes.flakyPolicy ?? current.flakyPolicy,
      changed_by: input.changedBy,
      changed_at: changedAt,
    };
    const db = executorOf(tx);
    if (current.version === 0) {
      const inserted = await db
        .insertInto("repository_settings")
        .values({ tenant_id: input.tenantId, repository: input.repository, ...values })
        .onConflict((c) => c.columns(["tenant_id", "repository"]).doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 1) return { kind: "written", version: 1, changedAt };
    } else {
      const updated = await db
        .updateTable("repository_settings")
        .set(values)
        .where("tenant_id", "=", input.tenantId)
        .where("repository", "=", input.repository)
        .where("version", "=", current.version)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 1) return { kind: "written", version: values.version, changedAt };
    }
    const now = await readRepositorySettings(tx, input);
    return { kind: "stale", currentVersion: now?.version ?? current.version };
  });
}

const toColumn = (value: boolean | null): number | null => (value === null ? null : value ? 1 : 0);
