import { executorOf, inTransaction, type StorageOrTransaction } from "../executor.js";
import { formatTimestamp } from "../timestamps.js";
import { compareAndSetTenantRow } from "./compare-and-set-tenant-row.js";
import { readTenantSettings } from "./read-tenant-settings.js";

export interface TenantSettingsChanges {
  readonly defaultSize?: string;
  readonly allowedSizes?: readonly string[];
  readonly defaultToolchain?: string;
  readonly wallClockCeilingSeconds?: number;
  readonly artifactRetentionDays?: number;
  readonly logRetentionDays?: number;
  readonly agentsMaySubmit?: boolean;
}

export type VersionedWriteResult =
  | { kind: "written"; version: number; changedAt: string }
  | { kind: "stale"; currentVersion: number }
  | { kind: "not_found" };

/**
 * A compare-and-set write of a tenant's settings: applies only while `expectedVersion` is the
 * current version, moving it by one. The first write inserts the row (0 → 1); two first writes
 * collide on the primary key, later ones on `where version = expected`, so of two writers
 * naming one version exactly one wins and the other learns the current version. Joins the
 * caller's transaction (the keyed receipt and the audit entry commit with it).
 */
export async function writeTenantSettings(
  target: StorageOrTransaction,
  input: {
    tenantId: string;
    expectedVersion: number;
    changes: TenantSettingsChanges;
    changedBy: string;
    now: Date;
  },
): Promise<VersionedWriteResult> {
  return inTransaction(target, async (tx) => {
    const current = await readTenantSettings(tx, input);
    if (current === undefined) return { kind: "not_found" };
    if (current.version !== input.expectedVersion) return { kind: "stale", currentVersion: current.version };
    const c = input.changes;
    const changedAt = formatTimestamp(input.now);
    const allowed = c.allowedSizes ?? current.allowedSizes;
    const agents = c.agentsMaySubmit ?? current.agentsMaySubmit;
    const values = {
      version: current.version + 1,
      default_size: c.defaultSize ?? current.defaultSize,
      allowed_sizes: allowed === null ? null : JSON.stringify(allowed),
      default_toolchain: c.defaultToolchain ?? current.defaultToolchain,
      wall_clock_ceiling_seconds: c.wallClockCeilingSeconds ?? current.wallClockCeilingSeconds,
      artifact_retention_days: c.artifactRetentionDays ?? current.artifactRetentionDays,
      log_retention_days: c.logRetentionDays ?? current.logRetentionDays,
      agents_may_submit: agents === null ? null : agents ? 1 : 0,
      changed_by: input.changedBy,
      changed_at: changedAt,
    };
    const written = await compareAndSetTenantRow(executorOf(tx), "tenant_settings", {
      tenantId: input.tenantId,
      readVersion: current.version,
      values,
    });
    if (written) return { kind: "written", version: values.version, changedAt };
    const now = await readTenantSettings(tx, input);
    return { kind: "stale", currentVersion: now?.version ?? current.version };
  });
}
