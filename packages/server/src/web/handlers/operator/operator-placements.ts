import { randomUUID } from "node:crypto";
import {
  appendOperatorAuditEntry,
  type HostReceiptEntry,
  listLivePlacements,
  readReapReceipt,
  recordHostReceipt,
  requeueStalePlacement,
  type StorageOrTransaction,
} from "@kiln/storage";
import { awaitHostAnswer, HOST_ANSWER_WAIT_SECONDS } from "../../../domain/hosts/fleet/await-host-answer.js";
import {
  attemptOfVmId,
  isStale,
  lastRenewalOf,
  livePlacementsView,
  STALE_HEARTBEAT_SECONDS,
} from "../../../domain/hosts/fleet/live-placements.js";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type Handler, operatorOf } from "../../http/handler.js";

/** The most bytes a host's answer to a reap (its receipt entries) may take. */
const REAP_ANSWER_MAX_BYTES = 2 ** 20;

/** Entries per page of a reap receipt. */
export const RECEIPT_PAGE_ENTRIES = 20;

/** The reconciliations kiln performs, by category, with the mutation each admits. */
const RECONCILIATIONS: Record<string, readonly string[]> = {
  stale_lease: ["requeue"],
  orphan: ["reap"],
};

/** operator.placements.list: live placements, flagged first (domain/hosts/fleet/live-placements.ts). */
export const listPlacements: Handler<"operator.placements.list"> = async (ctx) =>
  livePlacementsView(await listLivePlacements(ctx.db), ctx.now);

/**
 * operator.placements.reconcile: applies one category's mutation to a placement. `stale_lease`
 * / `requeue`: a placement whose host stopped renewing its lease is recorded lost and its job
 * handed back to the queue now, rather than when the lease lapses; fenced on the lease the
 * operator read (`expected_lease_expires_at`), so a host that renewed since makes it `conflict`,
 * as does a placement whose heartbeat is not stale. `orphan` / `reap`: see reapOrphan. Each
 * writes the reap receipt (operator.placements.receipt). Audited, refusals included. Other
 * pairs are `invalid_request`.
 */
export const reconcilePlacement: Handler<"operator.placements.reconcile"> = async (ctx) => {
  const operator = operatorOf(ctx);
  const { job_id: jobId, vm_id: vmId } = ctx.params;
  const { category, mutation, expected_lease_expires_at: expected, note } = ctx.body;
  const admitted = RECONCILIATIONS[category];
  if (admitted === undefined || !admitted.includes(mutation)) {
    return refuse(
      "invalid_request",
      `body.category ${category} with body.mutation ${mutation} is not a reconciliation kiln performs; admitted: ${Object.entries(
        RECONCILIATIONS,
      )
        .map(([c, ms]) => ms.map((m) => `${c}/${m}`).join(", "))
        .join(", ")}`,
    );
  }
  const attempt = attemptOfVmId(jobId, vmId);
  if (attempt === null) {
    return refuse("invalid_request", `vm_id ${vmId} names no attempt of job ${jobId} (expected ${jobId}-a<attempt>)`);
  }
  const target = `placement:${jobId}/${vmId}`;
  const audit = (trx: StorageOrTransaction, outcome: string, detail: string) =>
    appendOperatorAuditEntry(
      trx,
      { actor: operator.principal, target, value: operatorAuditValue(ctx.op.id, outcome, detail) },
      ctx.now,
    );
  if (category === "orphan") {
    return reapOrphan(ctx, { jobId, vmId, attempt, note: note ?? null, principal: operator.principal, audit });
  }
  if (expected === undefined) {
    return refuse(
      "invalid_request",
      "body.expected_lease_expires_at is required: the lease as operator.placements.list read it",
    );
  }
  if (!isStale(expected, ctx.now)) {
    const detail = `the placement's heartbeat is not stale: its lease was renewed at ${lastRenewalOf(expected).toISOString()}, less than ${STALE_HEARTBEAT_SECONDS}s ago; nothing to reconcile`;
    await audit(ctx.deps.storage, "conflict", detail);
    return refuse("conflict", detail);
  }
  const reason = `${category}/${mutation}${note === undefined ? "" : `: ${note}`}`;
  const result = await requeueStalePlacement(ctx.deps.storage, {
    jobId,
    attempt,
    expectedLeaseExpiresAt: expected,
    actor: operator.principal,
    reason,
    receipt: {
      id: `receipt-${randomUUID()}`,
      vmId,
      summary: `stale lease reconciled by ${operator.principal}: ${reason}`,
    },
    now: ctx.now,
    alsoInTransaction: async (trx, outcome) => {
      await audit(trx, outcome === "conflict" ? "conflict" : "performed", `${reason} → ${outcome}`);
    },
  });
  switch (result.kind) {
    case "not_found":
      return refuse("operator_not_found", `job ${jobId} has no attempt ${attempt}`);
    case "conflict":
      return refuse("conflict", result.detail);
    default: {
      const receipt = await readReapReceipt(ctx.deps.storage, { jobId, vmId });
      return {
        job_id: jobId,
        vm_id: vmId,
        category,
        mutation,
        outcome: result.kind === "requeued" ? "requeued" : result.kind === "failed" ? "attempt_failed" : "cancelled",
        reconciled_by: operator.principal,
        reconciled_at: ctx.now.toISOString(),
        receipt: receipt?.id ?? null,
        entries: result.entries,
      };
    }
  }
};

/**
 * `orphan` / `reap`: a sandbox a host reports with no live attempt behind it is reaped by that
 * host (its processes killed, its cgroup and directories removed; host/src/agent/reap-sandbox.ts)
 * on its next fleet poll; the entries it answers become the reap receipt. `conflict` when the
 * state moved since the list: the attempt is live after all, no host reports the sandbox any
 * more, or the host runs the attempt; `upstream_failed` when the host does not answer or
 * cannot reap.
 */
async function reapOrphan(
  ctx: Parameters<Handler<"operator.placements.reconcile">>[0],
  input: {
    jobId: string;
    vmId: string;
    attempt: number;
    note: string | null;
    principal: string;
    audit: (trx: StorageOrTransaction, outcome: string, detail: string) => Promise<unknown>;
  },
) {
  const { jobId, vmId } = input;
  const refuseAudited = async (code: "conflict" | "upstream_failed", detail: string) => {
    await input.audit(ctx.deps.storage, code, detail);
    return refuse(code, detail);
  };
  const { placements, sandboxReports } = await listLivePlacements(ctx.db);
  const live = placements.find((p) => p.jobId === jobId && p.attempt === input.attempt);
  if (live !== undefined) {
    return refuseAudited(
      "conflict",
      `attempt ${input.attempt} of job ${jobId} is live on host ${live.hostId}: not an orphan`,
    );
  }
  const reporter = sandboxReports.find((r) => r.attemptIds.includes(vmId));
  if (reporter === undefined) {
    return refuseAudited("conflict", `no host reports a sandbox ${vmId} any more; re-read the placements`);
  }
  const state = await awaitHostAnswer(ctx.deps, {
    hostId: reporter.hostId,
    kind: "reap_sandbox",
    path: vmId,
    maxBytes: REAP_ANSWER_MAX_BYTES,
    requestedBy: input.principal,
  });
  if (state.kind === "expired") {
    return refuseAudited(
      "upstream_failed",
      `host ${reporter.hostId} did not answer the reap of ${vmId} within ${HOST_ANSWER_WAIT_SECONDS}s`,
    );
  }
  if (state.kind === "failed") {
    const detail = `host ${reporter.hostId} could not reap ${vmId}: ${state.detail}`;
    return refuseAudited(state.refusal === "conflict" ? "conflict" : "upstream_failed", detail);
  }
  const entries = JSON.parse(Buffer.from(state.content, "base64").toString("utf8")) as HostReceiptEntry[];
  const receiptId = `receipt-${randomUUID()}`;
  const reason = `orphan/reap${input.note === null ? "" : `: ${input.note}`}`;
  await ctx.deps.storage.transaction(async (trx) => {
    await recordHostReceipt(trx, {
      id: receiptId,
      hostId: reporter.hostId,
      kind: "reap",
      placement: { jobId, vmId },
      actor: input.principal,
      at: ctx.now,
      summary: `orphaned sandbox reaped on host ${reporter.hostId} at ${input.principal}'s request: ${reason}`,
      entries,
    });
    await input.audit(trx, "performed", `${reason} → reaped on host ${reporter.hostId}: ${state.detail}`);
  });
  return {
    job_id: jobId,
    vm_id: vmId,
    category: "orphan",
    mutation: "reap",
    outcome: "reaped",
    reconciled_by: input.principal,
    reconciled_at: ctx.now.toISOString(),
    receipt: receiptId,
    host: reporter.hostId,
    entries,
  };
}

/**
 * operator.placements.receipt: a placement's finalized reap receipt, RECEIPT_PAGE_ENTRIES entries
 * a page. A placement with no reap receipt is `operator_not_found` (the operation names no
 * `not_found`); a page past the last is empty.
 */
export const placementReceipt: Handler<"operator.placements.receipt"> = async (ctx) => {
  const { job_id: jobId, vm_id: vmId } = ctx.params;
  const receipt = await readReapReceipt(ctx.db, { jobId, vmId });
  if (receipt === undefined) return refuse("operator_not_found", `no reap receipt for placement ${jobId}/${vmId}`);
  const page = ctx.query.page ?? 1;
  const start = (page - 1) * RECEIPT_PAGE_ENTRIES;
  const entries = receipt.entries.slice(start, start + RECEIPT_PAGE_ENTRIES);
  return {
    job_id: jobId,
    vm_id: vmId,
    finalized_at: receipt.at,
    page,
    next_page: start + RECEIPT_PAGE_ENTRIES < receipt.entries.length ? page + 1 : null,
    entries,
    host: receipt.hostId,
    receipt: receipt.id,
    reconciled_by: receipt.actor,
    summary: receipt.summary,
  };
};
