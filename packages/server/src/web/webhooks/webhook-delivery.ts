import { operationById } from "@kiln/contract";
import {
  appendAuditEntry,
  changeInstallationRepositories,
  type Db,
  type InstallationState,
  readInstallation,
  readJob,
  recordWebhookDelivery,
  settleWebhookDelivery,
  syncInstallation,
} from "@kiln/storage";
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from "fastify";
import type { Principal } from "../../domain/identity/principal.js";
import { Refusal } from "../../domain/refusal.js";
import type { AppDeps } from "../http/app-deps.js";
import { boundHandlerOf, type HandlerTable } from "../http/handler.js";

/** The actor kiln records for what the provider's deliveries change. */
export const WEBHOOK_ACTOR = "github";

export interface WebhookContext {
  readonly deps: AppDeps;
  readonly handlers: HandlerTable;
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
  readonly log: FastifyBaseLogger;
}

export interface WebhookResult {
  /** Whether the delivery changed anything. */
  readonly applied: boolean;
  readonly outcome: string;
}

interface Applied extends WebhookResult {
  /** The tenant whose audit records the change, when one was made. */
  readonly audit?: { tenantId: string; target: string; value: string };
}

/**
 * Applies one signature-verified delivery: the delivery id and the body's SHA-256 are recorded in
 * the transaction of its effect, so a redelivery, or a captured body replayed under any delivery
 * id (a header the signature does not cover), finds one of them and changes nothing, and a
 * delivery whose effect failed (rolled back) may be redelivered. What kiln handles:
 *
 * - `installation` created / deleted / suspend / unsuspend: the claimed installation's state
 *   (a created installation nobody has claimed yet waits for its claim);
 * - `installation_repositories` added / removed: the repositories it covers;
 * - `check_run` rerequested on kiln's check run: jobs.retry of the job its external id names,
 *   through the jobs.retry handler, as the tenant holding the installation.
 *
 * Anything else — another event or action, an installation no tenant holds — is recorded and
 * ignored. Every change is audited with actor `github`.
 */
export async function applyWebhookDelivery(
  ctx: WebhookContext,
  delivery: { deliveryId: string; event: string; bodySha256: string; payload: unknown },
): Promise<WebhookResult> {
  const { deps } = ctx;
  const afterCommit: (() => void)[] = [];
  const result = await deps.storage.transaction(async (trx) => {
    const now = deps.clock.now();
    const { deliveryId, event, bodySha256 } = delivery;
    const first = await recordWebhookDelivery(trx, { deliveryId, event, bodySha256 }, now);
    if (!first) return { applied: false, outcome: "already received (this delivery id or this signed body): ignored" };
    const applied = await effectOf(ctx, trx, delivery, now, afterCommit);
    if (applied.audit !== undefined) {
      await appendAuditEntry(
        trx,
        { ...applied.audit, actor: WEBHOOK_ACTOR, value: applied.audit.value.slice(0, 4000), effective: "now" },
        now,
      );
    }
    await settleWebhookDelivery(trx, { deliveryId: delivery.deliveryId, outcome: applied.outcome });
    return { applied: applied.applied, outcome: applied.outcome };
  });
  for (const effect of afterCommit) effect();
  ctx.log.info({ delivery: delivery.deliveryId, event: delivery.event, outcome: result.outcome }, "webhook delivery");
  return result;
}

const ignored = (outcome: string): Applied => ({ applied: false, outcome: `ignored: ${outcome}` });

async function effectOf(
  ctx: WebhookContext,
  db: Db,
  delivery: { deliveryId: string; event: string; payload: unknown },
  now: Date,
  afterCommit: (() => void)[],
): Promise<Applied> {
  const payload = (delivery.payload ?? {}) as WebhookPayload;
  const installationId = payload.installation?.id;
  if (typeof installationId !== "number") return ignored(`${delivery.event} names no installation`);
  const held = await readInstallation(db, { installationId });
  if (held === undefined) return ignored(`installation ${installationId} is not claimed by any tenant`);
  const target = `installation:${installationId}`;

  if (delivery.event === "installation") {
    const state = INSTALLATION_STATES[payload.action ?? ""];
    if (state === undefined) return ignored(`installation action ${payload.action ?? "(none)"}`);
    await syncInstallation(db, { installationId, state, by: WEBHOOK_ACTOR }, now);
    return {
      applied: true,
      outcome: `installation ${installationId} ${state}`,
      audit: { tenantId: held.tenantId, target, value: `${state} on the provider (${payload.action})` },
    };
  }

  if (delivery.event === "installation_repositories") {
    if (payload.action !== "added" && payload.action !== "removed") {
      return ignored(`installation_repositories action ${payload.action ?? "(none)"}`);
    }
    const names = (list: { full_name?: unknown }[] | undefined) =>
      (list ?? []).map((r) => r.full_name).filter((n): n is string => typeof n === "string" && n.includes("/"));
    const added = names(payload.repositories_added);
    const removed = names(payload.repositories_removed);
    await changeInstallationRepositories(db, { installationId, added, removed, by: WEBHOOK_ACTOR }, now);
    return {
      applied: true,
      outcome: `installation ${installationId}: ${added.length} added, ${removed.length} removed`,
      audit: {
        tenantId: held.tenantId,
        target,
        value: `repositories changed on the provider: added ${added.join(", ") || "none"}; removed ${removed.join(", ") || "none"}`,
      },
    };
  }

  if (delivery.event === "check_run") {
    if (payload.action !== "rerequested") return ignored(`check_run action ${payload.action ?? "(none)"}`);
    return rerunJob(ctx, db, { payload, tenantId: held.tenantId, deliveryId: delivery.deliveryId }, afterCommit);
  }
  return ignored(`event ${delivery.event}`);
}

/**
 * A re-run requested on the provider for kiln's check run: jobs.retry of the job named by the
 * run's external id, performed by the jobs.retry handler itself (admission, tenant policy, the
 * linked fresh job) as the tenant holding the installation, attributed to `github`. The job must
 * be that tenant's and of the repository the delivery names; jobs.retry's refusal (the job is
 * not terminal) is recorded as the outcome and changes nothing.
 */
async function rerunJob(
  ctx: WebhookContext,
  db: Db,
  input: { payload: WebhookPayload; tenantId: string; deliveryId: string },
  afterCommit: (() => void)[],
): Promise<Applied> {
  const run = input.payload.check_run;
  const jobId = run?.external_id;
  if (typeof jobId !== "string" || jobId === "") return ignored("the check run names no kiln job");
  const record = await readJob(db, { tenantId: input.tenantId, jobId });
  if (record === undefined || record.job.repository !== input.payload.repository?.full_name) {
    return ignored(`job ${jobId} is not a job of this installation's tenant and repository`);
  }
  const handler = boundHandlerOf(ctx.handlers, "jobs.retry");
  if (handler === undefined) return ignored("this build does not serve jobs.retry");
  const principal: Principal = {
    kind: "person",
    principal: WEBHOOK_ACTOR,
    tenantId: input.tenantId,
    userId: null,
    displayName: `re-run requested on the provider by ${input.payload.sender?.login ?? "someone"}`,
    role: null,
    scopes: ["submit"],
    // No kiln credential: the delivery's signature authenticated it. The session id names the
    // delivery so nothing can mistake it for a person's session.
    via: { kind: "session", sessionId: `webhook:${input.deliveryId}` },
    requestsPerMinute: null,
  };
  const now = ctx.deps.clock.now();
  try {
    const receipt = (await handler({
      op: operationById("jobs.retry"),
      deps: ctx.deps,
      principal,
      operator: null,
      idempotencyKey: `github-rerun:${input.deliveryId}`,
      params: { id: jobId },
      query: {},
      body: undefined,
      db,
      now,
      clock: { now: () => now },
      request: ctx.request,
      reply: ctx.reply,
      afterCommit: (effect) => afterCommit.push(effect),
    })) as { retry: string };
    return {
      applied: true,
      outcome: `job ${jobId} retried as ${receipt.retry}`,
      audit: {
        tenantId: input.tenantId,
        target: `job:${jobId}`,
        value: `re-run requested on the provider by ${input.payload.sender?.login ?? "someone"} (check run ${run?.id ?? "?"}): retried as ${receipt.retry}`,
      },
    };
  } catch (error) {
    // jobs.retry refuses before it writes anything, so the delivery is still recorded.
    if (error instanceof Refusal) return ignored(`jobs.retry refused: ${error.code}: ${error.message}`);
    throw error;
  }
}

const INSTALLATION_STATES: Record<string, InstallationState> = {
  created: "active",
  unsuspend: "active",
  suspend: "suspended",
  deleted: "deleted",
};

/** The members kiln reads of the provider's webhook payloads (all optional: nothing is trusted to be there). */
interface WebhookPayload {
  action?: string;
  installation?: { id?: unknown };
  repository?: { full_name?: unknown };
  repositories_added?: { full_name?: unknown }[];
  repositories_removed?: { full_name?: unknown }[];
  check_run?: { id?: unknown; external_id?: unknown };
  sender?: { login?: unknown };
}
