import { PLATFORM_DEFAULT_SIZE, SIZES, type TenantControls, type TenantSettings } from "@kiln/contract";
import type { StoredTenantControls, StoredTenantSettings, TenantConsumption } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { ARTIFACT_RETENTION_SECONDS } from "../policy/platform-limits.js";
import { storageQuotaBytes } from "../repositories/storage-quota.js";
import { wallClockBounds } from "../settings/repository-settings-view.js";

/**
 * A tenant's policy (docs: docs/decisions/tenant-policy.md): what its admins set
 * (tenant.settings.write) and what the operator sets (operator.tenants.controls.set), each
 * with its platform default.
 */

/** Job logs and retained Cargo output are served this long unless the tenant says otherwise. */
export const PLATFORM_LOG_RETENTION_DAYS = 30;
export const PLATFORM_ARTIFACT_RETENTION_DAYS = ARTIFACT_RETENTION_SECONDS / 86400;
/**
 * Concurrency when the operator has set none: the schema's largest value, more than any
 * deployment runs, so a tenant without controls is not counted at placement at all.
 */
export const PLATFORM_MAX_RUNNING_JOBS = 10000;
/** Source bytes a tenant may upload per calendar month (UTC) unless the operator says otherwise. */
export const PLATFORM_BANDWIDTH_BYTES_PER_MONTH = 1024 * 2 ** 30;

/** What a tenant.settings.write's receipt and audit entry say about when it takes effect. */
export const TENANT_SETTINGS_EFFECTIVE = "next admitted job";
/** What an operator.tenants.controls.set takes effect from (its audit entry says so). */
export const TENANT_CONTROLS_EFFECTIVE = "next admission and next placement";

/**
 * The tenant's effective admission policy, as jobs.submit applies it: one snapshot of its
 * settings and its operator controls, read once per submission and passed down.
 */
export interface TenantAdmissionPolicy {
  readonly allowedSizes: readonly string[];
  readonly agentsMaySubmit: boolean;
  /** The tenant's default ceiling for repositories that set none (null: the platform's). */
  readonly wallClockCeilingSeconds: number | null;
  /** Source bytes the tenant may upload this calendar month (operator control or platform default). */
  readonly bandwidthBytesPerMonth: number;
}

export function admissionPolicyOf(
  stored: StoredTenantSettings | undefined,
  controls: StoredTenantControls | undefined,
): TenantAdmissionPolicy {
  return {
    allowedSizes: stored?.allowedSizes ?? SIZES,
    agentsMaySubmit: stored?.agentsMaySubmit ?? true,
    wallClockCeilingSeconds: stored?.wallClockCeilingSeconds ?? null,
    bandwidthBytesPerMonth: controlLimits(controls, undefined).bandwidthBytesPerMonth,
  };
}

const origin = (written: unknown) => (written === null ? ("platform default" as const) : ("tenant setting" as const));

/** Settings this runtime records but does not apply yet (the receipt's `not_applied`). */
export const TENANT_SETTINGS_NOT_APPLIED: readonly string[] = ["default_toolchain", "log_retention_days"];

const detailOf = (name: string): { detail: string } | Record<string, never> =>
  TENANT_SETTINGS_NOT_APPLIED.includes(name) ? { detail: "Recorded; this runtime does not apply it yet." } : {};

/** The TenantSettings record: policy with version and attribution, limits beside consumption. */
export function tenantSettingsView(
  stored: StoredTenantSettings,
  controls: StoredTenantControls,
  consumption: TenantConsumption,
  input: { platformWallClock: number | undefined; platformStorageQuota: number | undefined; now: Date },
): Static<typeof TenantSettings> {
  const bounds = wallClockBounds(input.platformWallClock);
  const setting = (name: string, written: unknown, value: string | number | boolean | string[]) => ({
    name,
    value,
    origin: origin(written),
    status: TENANT_SETTINGS_NOT_APPLIED.includes(name) ? ("not applied" as const) : ("applied" as const),
    ...detailOf(name),
  });
  const effectiveControls = controlLimits(controls, input.platformStorageQuota);
  return {
    tenant: stored.tenantId,
    version: stored.version,
    changed_by: stored.changedBy,
    changed_at: stored.changedAt,
    settings: [
      setting("default_size", stored.defaultSize, stored.defaultSize ?? PLATFORM_DEFAULT_SIZE),
      setting("allowed_sizes", stored.allowedSizes, [...(stored.allowedSizes ?? SIZES)]),
      setting("default_toolchain", stored.defaultToolchain, stored.defaultToolchain ?? "stable"),
      setting(
        "wall_clock_ceiling_seconds",
        stored.wallClockCeilingSeconds,
        Math.min(stored.wallClockCeilingSeconds ?? bounds.platformDefault, bounds.platformDefault),
      ),
      setting(
        "artifact_retention_days",
        stored.artifactRetentionDays,
        stored.artifactRetentionDays ?? PLATFORM_ARTIFACT_RETENTION_DAYS,
      ),
      setting("log_retention_days", stored.logRetentionDays, stored.logRetentionDays ?? PLATFORM_LOG_RETENTION_DAYS),
      setting("agents_may_submit", stored.agentsMaySubmit, stored.agentsMaySubmit ?? true),
    ],
    limits: {
      max_running_jobs: { limit: effectiveControls.maxRunningJobs, consumption: consumption.runningJobs },
      storage_quota_bytes: { limit: effectiveControls.storageQuotaBytes, consumption: consumption.storageBytes },
      bandwidth_bytes_per_month: {
        limit: effectiveControls.bandwidthBytesPerMonth,
        consumption: consumption.bandwidthBytesThisMonth,
      },
    },
    consumption_measured_at: input.now.toISOString(),
    suspended: controls.suspended,
    operator_controlled: [
      "max_running_jobs",
      "storage_quota_bytes",
      "bandwidth_bytes_per_month",
      "rate_card",
      "suspension",
    ],
  };
}

/** The controls' limits with platform defaults filled in. */
export function controlLimits(controls: StoredTenantControls | undefined, platformStorageQuota: number | undefined) {
  return {
    maxRunningJobs: controls?.maxRunningJobs ?? PLATFORM_MAX_RUNNING_JOBS,
    storageQuotaBytes: controls?.storageQuotaBytes ?? storageQuotaBytes(platformStorageQuota),
    bandwidthBytesPerMonth: controls?.bandwidthBytesPerMonth ?? PLATFORM_BANDWIDTH_BYTES_PER_MONTH,
  };
}

/** The TenantControls record. */
export function tenantControlsView(
  controls: StoredTenantControls,
  consumption: TenantConsumption,
  input: { platformStorageQuota: number | undefined; now: Date },
): Static<typeof TenantControls> {
  const limits = controlLimits(controls, input.platformStorageQuota);
  return {
    tenant: controls.tenantId,
    version: controls.version,
    max_running_jobs: limits.maxRunningJobs,
    storage_quota_bytes: limits.storageQuotaBytes,
    bandwidth_bytes_per_month: limits.bandwidthBytesPerMonth,
    rate_card: controls.rateCard === null ? null : { ...controls.rateCard },
    suspension: {
      suspended: controls.suspended,
      reason: controls.suspended ? controls.suspensionReason : null,
      since: controls.suspended ? controls.suspendedSince : null,
    },
    consumption: {
      running_jobs: consumption.runningJobs,
      storage_bytes: consumption.storageBytes,
      bandwidth_bytes_this_month: consumption.bandwidthBytesThisMonth,
      observed_at: input.now.toISOString(),
    },
    changed_by: controls.changedBy,
    changed_at: controls.changedAt,
  };
}
