import { randomUUID } from "node:crypto";
import {
  appendOperatorAuditEntry,
  listTenants,
  readJobStatus,
  readTenantConsumption,
  readTenantControls,
  refreshTenantQueueAnnotation,
  type TenantControlsChanges,
  writeTenantControls,
} from "@kiln/storage";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { TENANT_CONTROLS_EFFECTIVE, tenantControlsView } from "../../../domain/tenants/tenant-policy.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/** operator.tenants.list (a kiln extension): the tenants by identifier, for the console's Tenants page. */
export const listOperatorTenants: Handler<"operator.tenants.list"> = async (ctx) => {
  const page = await listTenants(ctx.db, { limit: ctx.query.limit ?? 200 });
  return {
    tenants: page.tenants.map((t) => ({
      tenant: t.id,
      display_name: t.displayName,
      created_at: t.createdAt,
      members: t.members,
      suspended: t.suspended,
    })),
    more: page.more,
  };
};

/**
 * operator.tenants.controls.get: the controls beside consumption. The operation's refusals
 * (spec) are operator_not_found and unavailable only, so an unknown tenant is answered
 * operator_not_found (404) naming it.
 */
export const getTenantControls: Handler<"operator.tenants.controls.get"> = async (ctx) => {
  const tenantId = ctx.params.tenant;
  const controls = await readTenantControls(ctx.db, { tenantId });
  if (controls === undefined) return refuse("operator_not_found", `no tenant ${tenantId}`);
  const consumption = await readTenantConsumption(ctx.db, { tenantId, now: ctx.now });
  return tenantControlsView(controls, consumption, { platformStorageQuota: ctx.deps.storageQuotaBytes, now: ctx.now });
};

/**
 * operator.tenants.controls.set: a compare-and-set on the version read (a moved-past one is
 * `conflict` naming the current version), in the operator audit with the change, effective at
 * the next admission (suspension) and placement (concurrency; the tenant's queued jobs are
 * re-annotated at once) and lineage save (storage quota).
 *
 * Suspension refuses new submissions and retries (`conflict` naming the suspension); jobs
 * already running run to their end, and queued jobs stay queued — not placed, annotated — until
 * the suspension is lifted, when they run in their queue order.
 *
 * A `credit` is recorded once, with the version the update moves (so a retry of the same
 * update is a `conflict`, never a second credit), and is listed by usage.export as an
 * `operator_credit` adjustment in the month it was granted; its audit entry names it.
 */
export const setTenantControls: Handler<"operator.tenants.controls.set"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const tenantId = ctx.params.tenant;
  const body = ctx.body;
  const c = body.changes;
  const audit = (outcome: string, value: string) =>
    appendOperatorAuditEntry(
      ctx.db,
      {
        actor: operator.principal,
        target: `tenant-controls:${tenantId}`,
        value: operatorAuditValue(ctx.op.id, outcome, value),
      },
      ctx.clock.now(),
    );
  if (c.suspension?.suspended === true && c.suspension.reason === undefined) {
    refuse("invalid_request", "body.changes.suspension.reason is required when suspending");
  }
  const credit = c.credit;
  if (credit !== undefined && (credit.vcpu_seconds ?? 0) === 0 && (credit.amount_cents ?? 0) === 0) {
    refuse("invalid_request", "body.changes.credit needs vcpu_seconds or amount_cents above zero");
  }
  if (credit?.job !== undefined && (await readJobStatus(ctx.db, { tenantId, jobId: credit.job })) === undefined) {
    refuse("invalid_request", `body.changes.credit.job ${credit.job} is not a job of tenant ${tenantId}`);
  }
  const changes: TenantControlsChanges = {
    ...(c.max_running_jobs === undefined ? {} : { maxRunningJobs: c.max_running_jobs }),
    ...(c.storage_quota_bytes === undefined ? {} : { storageQuotaBytes: c.storage_quota_bytes }),
    ...(c.bandwidth_bytes_per_month === undefined ? {} : { bandwidthBytesPerMonth: c.bandwidth_bytes_per_month }),
    ...(c.rate_card === undefined ? {} : { rateCard: c.rate_card }),
    ...(c.suspension === undefined
      ? {}
      : { suspension: { suspended: c.suspension.suspended, reason: c.suspension.reason ?? null } }),
    ...(credit === undefined
      ? {}
      : {
          credit: {
            id: `credit_${randomUUID()}`,
            vcpuSeconds: credit.vcpu_seconds ?? 0,
            amountCents: credit.amount_cents ?? 0,
            job: credit.job ?? null,
            reason: credit.reason,
          },
        }),
  };
  const result = await writeTenantControls(ctx.db, {
    tenantId,
    expectedVersion: body.expected_version,
    changes,
    changedBy: operator.principal,
    now: ctx.now,
  });
  if (result.kind === "not_found") return refuse("invalid_request", `path tenant ${tenantId} does not exist`);
  if (result.kind === "stale") {
    await audit("conflict", `expected_version ${body.expected_version}, current ${result.currentVersion}`);
    return refuse(
      "conflict",
      `body.expected_version ${body.expected_version} is not the current controls version of ${tenantId} (${result.currentVersion}); re-read and set again`,
      { current_version: result.currentVersion },
    );
  }
  await refreshTenantQueueAnnotation(ctx.db, {
    tenantId,
    skipLocked: ctx.deps.storage.capabilities.skipLocked,
  });
  await audit(
    "performed",
    `version ${result.version}: ${JSON.stringify(c)}${body.note === undefined ? "" : ` (${body.note})`}; effective ${TENANT_CONTROLS_EFFECTIVE}`,
  );
  const controls = await readTenantControls(ctx.db, { tenantId });
  if (controls === undefined) throw new Error(`tenant ${tenantId} vanished after its controls were written`);
  const consumption = await readTenantConsumption(ctx.db, { tenantId, now: ctx.now });
  return tenantControlsView(controls, consumption, { platformStorageQuota: ctx.deps.storageQuotaBytes, now: ctx.now });
};
