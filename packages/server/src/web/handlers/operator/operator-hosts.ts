import {
  appendOperatorAuditEntry,
  drainHost,
  type HostRecord,
  type HostStateChange,
  listHostReceipts,
  listHostRecords,
  readHostRecord,
  undrainHost,
} from "@kiln/storage";
import { EMBEDDED_HOST_ID } from "../../../domain/hosts/host-identities.js";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/**
 * The operator's host operations over the hosts kiln records (the embedded host `local` and
 * enrolled remote hosts; storage `hosts/host-drain.ts`).
 *
 * States: `serving`; `draining` once drained while it still runs attempts (placement stopped,
 * running work continues); `drained` once a drained host runs none. Undrain names the host's
 * revision as its policy revision (kiln keeps no host policy apart from the host record, so the
 * revision the operator read is the policy it returns under); a moved-past one is `conflict`.
 * An unknown host is `operator_not_found` (the operations' refusals name no `not_found`).
 * `deployed_release` is what an operator registered (operator.hosts.deployment.register, in
 * operator-deployments.ts); receipts are the host's deployment, initialization and reap receipts.
 */

/** The newest receipts operator.hosts.get shows; older ones stay recorded. */
const HOST_RECEIPTS_SHOWN = 20;

function stateOf(host: HostRecord): "serving" | "draining" | "drained" {
  if (host.state === "serving") return "serving";
  return host.runningAttempts > 0 ? "draining" : "drained";
}

/** One host as the inventory and every host mutation answer it (HostInventoryView). */
export function inventoryView(host: HostRecord) {
  return {
    host: host.id,
    state: stateOf(host),
    revision: host.revision,
    deployed_release: host.deployedRelease?.release ?? null,
    ...(host.deployedRelease === null
      ? {}
      : { deployed_release_sha256: host.deployedRelease.sha256, deployed_at: host.deployedRelease.at }),
    last_attribution:
      host.lastChange === null
        ? null
        : {
            actor: host.lastChange.actor,
            action: host.lastChange.action,
            at: host.lastChange.at,
            ...(host.lastChange.reason === null ? {} : { reason: host.lastChange.reason }),
          },
    embedded: host.id === EMBEDDED_HOST_ID,
    running_attempts: host.runningAttempts,
  };
}

/** operator.hosts.list: every recorded host, by id. */
export const listHosts: Handler<"operator.hosts.list"> = async (ctx) =>
  (await listHostRecords(ctx.db)).map(inventoryView);

/** operator.hosts.get: serving state, drain attribution, blockers, receipts. */
export const getHost: Handler<"operator.hosts.get"> = async (ctx) => {
  const host = await readHostRecord(ctx.db, ctx.params.id);
  if (host === undefined) return refuse("operator_not_found", `no host ${ctx.params.id}`);
  const blockers: { kind: string; detail: string; since?: string }[] = [];
  if (host.state === "draining") {
    blockers.push({
      kind: "drained",
      detail: `placement stopped by ${host.drainedBy ?? "an operator"}; undrain with policy_revision ${host.revision}`,
      ...(host.drainedAt === null ? {} : { since: host.drainedAt }),
    });
    if (host.runningAttempts > 0) {
      blockers.push({
        kind: "running_attempts",
        detail: `${host.runningAttempts} running attempt(s) continue; the host is drained once they end`,
      });
    }
  }
  return {
    host: host.id,
    serving_state: stateOf(host),
    drain_attribution:
      host.state === "draining" && host.drainedBy !== null && host.drainedAt !== null
        ? {
            actor: host.drainedBy,
            action: "operator.hosts.drain",
            at: host.drainedAt,
            ...(host.drainReason === null ? {} : { reason: host.drainReason }),
          }
        : null,
    blockers,
    receipts: (await listHostReceipts(ctx.db, { hostId: host.id, limit: HOST_RECEIPTS_SHOWN })).map((r) => ({
      kind: r.kind,
      id: r.id,
      at: r.at,
      actor: r.actor,
      summary: r.summary,
      ...(r.jobId === null || r.vmId === null ? {} : { job_id: r.jobId, vm_id: r.vmId }),
    })),
    deployed_release: host.deployedRelease,
    revision: host.revision,
    running_attempts: host.runningAttempts,
    vcpus: host.vcpus,
    memory_bytes: host.memoryBytes,
    isolation: host.isolation,
    enrolled_at: host.enrolledAt,
    last_heartbeat_at: host.lastHeartbeatAt,
    embedded: host.id === EMBEDDED_HOST_ID,
  };
};

/** Runs a drain or undrain with its operator audit entry in one transaction; refuses as the spec says. */
async function changeHost(
  ctx: Parameters<Handler<"operator.hosts.drain">>[0] | Parameters<Handler<"operator.hosts.undrain">>[0],
  change: (trx: Parameters<typeof drainHost>[0], actor: string) => Promise<HostStateChange>,
  describe: (result: HostStateChange) => string,
) {
  const operator = operatorOf(ctx);
  const hostId = ctx.params.id;
  const result = await ctx.deps.storage.transaction(async (trx) => {
    const r = await change(trx, operator.principal);
    if (r.kind !== "not_found") {
      await appendOperatorAuditEntry(
        trx,
        {
          actor: operator.principal,
          target: `host:${hostId}`,
          value: operatorAuditValue(ctx.op.id, r.kind === "changed" ? "performed" : "conflict", describe(r)),
        },
        ctx.clock.now(),
      );
    }
    return r;
  });
  switch (result.kind) {
    case "not_found":
      return refuse("operator_not_found", `no host ${hostId}`);
    case "conflict":
      return refuse("conflict", describe(result));
    case "changed":
      return inventoryView(result.host);
  }
}

/** operator.hosts.drain: placement on the host stops; its running attempts continue. Audited. */
export const drainHostHandler: Handler<"operator.hosts.drain"> = async (ctx) =>
  changeHost(
    ctx,
    (trx, actor) => drainHost(trx, { hostId: ctx.params.id, actor, action: ctx.op.id, reason: null, now: ctx.now }),
    (r) =>
      r.kind === "conflict"
        ? `host ${ctx.params.id} is ${r.state === "draining" ? "already drained" : r.state} (revision ${r.revision}); drain admits a serving host`
        : `drained; placement stops, running work continues`,
  );

/** operator.hosts.undrain: a drained host returns to placement under the named policy revision. Audited. */
export const undrainHostHandler: Handler<"operator.hosts.undrain"> = async (ctx) => {
  const { policy_revision: expected, note } = ctx.body;
  return changeHost(
    ctx,
    (trx, actor) =>
      undrainHost(trx, {
        hostId: ctx.params.id,
        expectedRevision: expected,
        actor,
        action: ctx.op.id,
        reason: note ?? null,
        now: ctx.now,
      }),
    (r) => {
      if (r.kind !== "conflict") {
        return `returned to placement under policy revision ${expected}${note === undefined ? "" : ` (${note})`}`;
      }
      return r.state === "serving"
        ? `host ${ctx.params.id} is serving (revision ${r.revision}); undrain admits a drained host`
        : `body.policy_revision ${expected} is not host ${ctx.params.id}'s current policy revision ${r.revision}; re-read and undrain again`;
    },
  );
};
