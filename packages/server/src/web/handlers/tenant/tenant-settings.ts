import {
  PLATFORM_DEFAULT_SIZE,
  SIZES,
  TENANT_OPERATOR_CONTROLLED_SETTINGS,
  TENANT_WRITABLE_SETTINGS,
} from "@kiln/contract";
import {
  appendAuditEntry,
  readTenantConsumption,
  readTenantControls,
  readTenantSettings,
  type TenantSettingsChanges,
  writeTenantSettings,
} from "@kiln/storage";
import { Refusal, refuse } from "../../../domain/refusal.js";
import { wallClockBounds } from "../../../domain/settings/repository-settings-view.js";
import {
  TENANT_SETTINGS_EFFECTIVE,
  TENANT_SETTINGS_NOT_APPLIED,
  tenantSettingsView,
} from "../../../domain/tenants/tenant-policy.js";
import { type Handler, principalOf } from "../../http/handler.js";

/** tenant.settings.get: the policy at its version, the operator's limits beside consumption. */
export const getTenantSettings: Handler<"tenant.settings.get"> = async (ctx) => {
  const tenantId = principalOf(ctx).tenantId;
  const [stored, controls] = [
    await readTenantSettings(ctx.db, { tenantId }),
    await readTenantControls(ctx.db, { tenantId }),
  ];
  if (stored === undefined || controls === undefined)
    throw new Error(`tenant ${tenantId} of a principal does not exist`);
  const consumption = await readTenantConsumption(ctx.db, { tenantId, now: ctx.now });
  return tenantSettingsView(stored, controls, consumption, {
    platformWallClock: ctx.deps.wallClockSeconds,
    platformStorageQuota: ctx.deps.storageQuotaBytes,
    now: ctx.now,
  });
};

/**
 * tenant.settings.write: all-or-nothing compare-and-set on the version read (a moved-past
 * version is `stale_version` naming the current one), audited, effective from the next
 * admitted job. Naming an operator-controlled setting is refused `operator_controlled`, and
 * that refusal is audited too (recorded with the key's answer, since the write rolls back).
 */
export const writeTenantSettingsHandler: Handler<"tenant.settings.write"> = async (ctx) => {
  const principal = principalOf(ctx);
  const changes = ctx.body.changes;
  const names = Object.keys(changes);
  const operatorControlled = names.filter((n) =>
    (TENANT_OPERATOR_CONTROLLED_SETTINGS as readonly string[]).includes(n),
  );
  if (operatorControlled.length > 0) {
    const detail = `body.changes.${operatorControlled.join(", body.changes.")} change only through the operator console`;
    throw new Refusal("operator_controlled", detail, {}, async (db) => {
      await appendAuditEntry(
        db,
        {
          tenantId: principal.tenantId,
          actor: principal.principal,
          target: `tenant-settings:${principal.tenantId}`,
          value: `refused operator_controlled: ${operatorControlled.join(", ")}`,
          effective: "not applied (refused)",
        },
        ctx.clock.now(),
      );
    });
  }
  const writable = new Set<string>(TENANT_WRITABLE_SETTINGS);
  for (const name of names) {
    if (!writable.has(name)) {
      refuse(
        "invalid_request",
        `body.changes.${name} is not a tenant setting; tenant.settings.write accepts ${TENANT_WRITABLE_SETTINGS.join(", ")}`,
      );
    }
  }
  const current = await readTenantSettings(ctx.db, { tenantId: principal.tenantId });
  if (current === undefined) throw new Error(`tenant ${principal.tenantId} of a principal does not exist`);
  const ceiling = changes.wall_clock_ceiling_seconds as number | undefined;
  const bounds = wallClockBounds(ctx.deps.wallClockSeconds);
  if (ceiling !== undefined && (ceiling < bounds.minimum || ceiling > bounds.platformDefault)) {
    refuse(
      "invalid_request",
      `body.changes.wall_clock_ceiling_seconds must be between ${bounds.minimum} and ${bounds.platformDefault} (the platform default is also the maximum)`,
    );
  }
  // The default size must stay among the allowed sizes (as both will be after the write).
  const allowed: readonly string[] = changes.allowed_sizes ?? current.allowedSizes ?? SIZES;
  const defaultSize = changes.default_size ?? current.defaultSize ?? PLATFORM_DEFAULT_SIZE;
  if (!allowed.includes(defaultSize)) {
    refuse(
      "invalid_request",
      `body.changes.${changes.allowed_sizes === undefined ? "default_size" : "allowed_sizes"}: default_size ${defaultSize} must be one of allowed_sizes (${allowed.join(", ")})`,
    );
  }
  const next: TenantSettingsChanges = {
    ...(changes.default_size === undefined ? {} : { defaultSize: changes.default_size }),
    ...(changes.allowed_sizes === undefined ? {} : { allowedSizes: changes.allowed_sizes }),
    ...(changes.default_toolchain === undefined ? {} : { defaultToolchain: changes.default_toolchain }),
    ...(ceiling === undefined ? {} : { wallClockCeilingSeconds: ceiling }),
    ...(changes.artifact_retention_days === undefined
      ? {}
      : { artifactRetentionDays: changes.artifact_retention_days }),
    ...(changes.log_retention_days === undefined ? {} : { logRetentionDays: changes.log_retention_days }),
    ...(changes.agents_may_submit === undefined ? {} : { agentsMaySubmit: changes.agents_may_submit }),
  };
  const result = await writeTenantSettings(ctx.db, {
    tenantId: principal.tenantId,
    expectedVersion: ctx.body.version,
    changes: next,
    changedBy: principal.principal,
    now: ctx.now,
  });
  if (result.kind === "not_found") throw new Error(`tenant ${principal.tenantId} of a principal does not exist`);
  if (result.kind === "stale") {
    return refuse(
      "stale_version",
      `body.version ${ctx.body.version} is not the current tenant settings version; re-read the settings (version ${result.currentVersion}) and write again`,
      { current_version: result.currentVersion },
    );
  }
  await appendAuditEntry(
    ctx.db,
    {
      tenantId: principal.tenantId,
      actor: principal.principal,
      target: `tenant-settings:${principal.tenantId}`,
      value: `version ${result.version}: ${JSON.stringify(changes)}`,
      effective: TENANT_SETTINGS_EFFECTIVE,
    },
    ctx.clock.now(),
  );
  return {
    target: `tenant:${principal.tenantId}`,
    version: result.version,
    changed_by: principal.principal,
    changed_at: result.changedAt,
    effective: TENANT_SETTINGS_EFFECTIVE,
    not_applied: names.filter((n) => TENANT_SETTINGS_NOT_APPLIED.includes(n)),
  };
};
