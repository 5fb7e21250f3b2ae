import { executorOf, type StorageOrTransaction } from "../executor.js";

/** A repository's written settings; a null value is "the platform default". */
export interface StoredRepositorySettings {
  readonly repository: string;
  readonly version: number;
  readonly affectedTests: boolean | null;
  readonly totalInjectionOptOut: boolean | null;
  readonly wallClockCeilingSeconds: number | null;
  readonly lineageSeeding: boolean | null;
  readonly flakyRetries: number | null;
  readonly flakyPolicy: "pass" | "fail" | null;
  readonly changedBy: string;
  readonly changedAt: string;
}

const asBoolean = (value: number | boolean | null): boolean | null => (value === null ? null : Boolean(value));

/**
 * The settings of one onboarded repository: its row, or — before its first write — version 0
 * with every value defaulted and the onboarding as the last change. Undefined when the
 * repository is not onboarded for the tenant. A plain read: it has no lifecycle effect.
 */
export async function readRepositorySettings(
  target: StorageOrTransaction,
  input: { tenantId: string; repository: string },
): Promise<StoredRepositorySettings | undefined> {
  const row = await executorOf(target)
    .selectFrom("repositories as r")
    .leftJoin("repository_settings as s", (join) =>
      join.onRef("s.tenant_id", "=", "r.tenant_id").onRef("s.repository", "=", "r.name"),
    )
    .select([
      "r.name",
      "r.onboarded_by",
      "r.onboarded_at",
      "s.version",
      "s.affected_tests",
      "s.total_injection_opt_out",
      "s.wall_clock_ceiling_seconds",
      "s.lineage_seeding",
      "s.flaky_retries",
      "s.flaky_policy",
      "s.changed_by",
      "s.changed_at",
    ])
    .where("r.tenant_id", "=", input.tenantId)
    .where("r.name", "=", input.repository)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    repository: row.name,
    version: row.version ?? 0,
    affectedTests: asBoolean(row.affected_tests),
    totalInjectionOptOut: asBoolean(row.total_injection_opt_out),
    wallClockCeilingSeconds: row.wall_clock_ceiling_seconds,
    lineageSeeding: asBoolean(row.lineage_seeding),
    flakyRetries: row.flaky_retries,
    flakyPolicy: row.flaky_policy === "pass" || row.flaky_policy === "fail" ? row.flaky_policy : null,
    changedBy: row.changed_by ?? row.onboarded_by,
    changedAt: row.changed_at ?? row.onboarded_at,
  };
}
