import { executorOf, type StorageOrTransaction } from "../executor.js";

/** A tenant's written settings; a null value is "the platform default". */
export interface StoredTenantSettings {
  readonly tenantId: string;
  readonly version: number;
  readonly defaultSize: string | null;
  readonly allowedSizes: readonly string[] | null;
  readonly defaultToolchain: string | null;
  readonly wallClockCeilingSeconds: number | null;
  readonly artifactRetentionDays: number | null;
  readonly logRetentionDays: number | null;
  readonly agentsMaySubmit: boolean | null;
  /** Null while never written. */
  readonly changedBy: string | null;
  readonly changedAt: string | null;
}

/**
 * The settings of one tenant: its row, or — before the first write — version 0 with every
 * value defaulted. Undefined when the tenant does not exist. A plain read.
 */
export async function readTenantSettings(
  target: StorageOrTransaction,
  input: { tenantId: string },
): Promise<StoredTenantSettings | undefined> {
  const row = await executorOf(target)
    .selectFrom("tenants as t")
    .leftJoin("tenant_settings as s", "s.tenant_id", "t.id")
    .select([
      "t.id",
      "s.version",
      "s.default_size",
      "s.allowed_sizes",
      "s.default_toolchain",
      "s.wall_clock_ceiling_seconds",
      "s.artifact_retention_days",
      "s.log_retention_days",
      "s.agents_may_submit",
      "s.changed_by",
      "s.changed_at",
    ])
    .where("t.id", "=", input.tenantId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    tenantId: row.id,
    version: row.version ?? 0,
    defaultSize: row.default_size,
    allowedSizes: row.allowed_sizes === null ? null : (JSON.parse(row.allowed_sizes) as string[]),
    defaultToolchain: row.default_toolchain,
    wallClockCeilingSeconds: row.wall_clock_ceiling_seconds,
    artifactRetentionDays: row.artifact_retention_days,
    logRetentionDays: row.log_retention_days,
    agentsMaySubmit: row.agents_may_submit === null ? null : Boolean(row.agents_may_submit),
    changedBy: row.changed_by,
    changedAt: row.changed_at,
  };
}
