import { readTenantControls, type StorageOrTransaction, sumUploadedBytes } from "@kiln/storage";
import { refuse } from "../refusal.js";
import { controlLimits } from "./tenant-policy.js";

/** The calendar month (UTC) of `now` as [start, next start): the bandwidth period. */
export function bandwidthPeriodOf(now: Date): { start: Date; next: Date; period: string } {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return { start, next, period: start.toISOString().slice(0, 7) };
}

/** The tenant's monthly bandwidth allowance: the operator's control, the platform default otherwise. */
export async function readBandwidthAllowance(db: StorageOrTransaction, tenantId: string): Promise<number> {
  return controlLimits(await readTenantControls(db, { tenantId }), undefined).bandwidthBytesPerMonth;
}

/**
 * Refuses a source transfer that would pass the tenant's bandwidth allowance
 * (operator.tenants.controls `bandwidth_bytes_per_month`, the platform default otherwise):
 * `conflict` naming the allowance and what is used, with `retry_after_seconds` and `reset_at` at
 * the start of the next calendar month (UTC), when the allowance starts again. `incomingBytes` is
 * what this request would add (a part's bytes at sources.chunk.put, an inline source's file bytes
 * at jobs.submit; 0 at sources.reserve, which is refused only once the allowance is used up, since
 * the parts it declares may turn out reused).
 *
 * Checked before anything is stored, so a refused part leaves no partial state: the client sends
 * it again after the reset (the upload's own lifetime permitting). Used is counted from what
 * storage recorded (sumUploadedBytes), the same figure tenant.settings.get reports. Parts sent at
 * the same instant are not serialised against each other, so concurrent parts can pass the
 * allowance by at most what is in flight at once (each part at most 4 MiB).
 *
 * `allowance` is the tenant's, as its caller read it: jobs.submit passes the one from the
 * admission's policy snapshot (admitTenantPolicy), the upload operations readBandwidthAllowance's.
 */
export async function refuseOverBandwidth(
  db: StorageOrTransaction,
  input: { tenantId: string; allowance: number; incomingBytes: number; now: Date; operation: string },
): Promise<void> {
  const allowance = input.allowance;
  const { start, next, period } = bandwidthPeriodOf(input.now);
  const used = await sumUploadedBytes(db, { tenantId: input.tenantId, since: start });
  const over = input.incomingBytes === 0 ? used >= allowance : used + input.incomingBytes > allowance;
  if (!over) return;
  const resetAt = next.toISOString();
  refuse(
    "conflict",
    `the tenant's bandwidth allowance for ${period} is used: ${used} of ${allowance} source bytes uploaded` +
      (input.incomingBytes === 0 ? "" : `, and these ${input.incomingBytes} bytes would pass it`) +
      `; ${input.operation} is accepted again from ${resetAt}`,
    {
      retry_after_seconds: Math.max(1, Math.ceil((next.getTime() - input.now.getTime()) / 1000)),
      reset_at: resetAt,
    },
  );
}
