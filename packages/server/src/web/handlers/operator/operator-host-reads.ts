import type { HostReadKind } from "@kiln/contract";
import { appendOperatorAuditEntry, readHostRecord } from "@kiln/storage";
import { awaitHostAnswer, HOST_ANSWER_WAIT_SECONDS } from "../../../domain/hosts/fleet/await-host-answer.js";
import { operatorAuditValue } from "../../../domain/platform/operator-audit-value.js";
import { refuse } from "../../../domain/refusal.js";
import { type BaseContext, type Handler, operatorOf, REPLY_SENT } from "../../http/handler.js";

/** The most bytes one read answers: the newest of a log, the first of an evidence file. */
export const HOST_READ_MAX_BYTES = 4 * 2 ** 20;
/** How long an operator's read waits for the host to answer (domain/hosts/fleet/await-host-answer.ts). */
export const HOST_READ_WAIT_SECONDS = HOST_ANSWER_WAIT_SECONDS;

/**
 * Reads from a host through the host protocol: the read is recorded, the host answers it on its
 * next fleet poll (host/src/agent/fleet-channel.ts) with at most HOST_READ_MAX_BYTES, and this
 * request waits for the answer until HOST_READ_WAIT_SECONDS have passed on the clock, then
 * answers `upstream_failed` (as it does when the host could not read). Every read is
 * attributed in the operator audit, answered or not. An unknown host is `operator_not_found`.
 */
async function readFromHost(
  ctx: BaseContext & { readonly params: { readonly id: string } },
  read: {
    kind: HostReadKind;
    path?: string;
    attempt?: number;
    executions?: number;
    maxBytes?: number;
    /** Whether the operation may answer a host's `not_found` and `conflict` as such. */
    namedRefusals?: boolean;
  },
  contentType: string,
): Promise<typeof REPLY_SENT> {
  const { kind } = read;
  const path = read.path ?? null;
  const operator = operatorOf(ctx);
  const hostId = ctx.params.id;
  if ((await readHostRecord(ctx.db, hostId)) === undefined) return refuse("operator_not_found", `no host ${hostId}`);
  const state = await awaitHostAnswer(ctx.deps, {
    hostId,
    kind,
    path,
    maxBytes: read.maxBytes ?? HOST_READ_MAX_BYTES,
    attempt: read.attempt ?? null,
    executions: read.executions ?? null,
    requestedBy: operator.principal,
  });
  const what = `${kind}${path === null ? "" : ` ${path}`}`;
  const outcome =
    state.kind === "answered"
      ? { result: "performed", detail: `${what}: ${state.detail}${state.truncated ? " (older bytes left out)" : ""}` }
      : state.kind === "failed"
        ? {
            result: read.namedRefusals === true && state.refusal !== null ? state.refusal : "upstream_failed",
            detail: `host ${hostId} could not read ${what}: ${state.detail}`,
          }
        : {
            result: "upstream_failed",
            detail: `host ${hostId} did not answer the ${what} read within ${HOST_READ_WAIT_SECONDS}s`,
          };
  await appendOperatorAuditEntry(
    ctx.deps.storage,
    {
      actor: operator.principal,
      target: `host:${hostId}`,
      value: operatorAuditValue(ctx.op.id, outcome.result, outcome.detail),
    },
    ctx.deps.clock.now(),
  );
  if (state.kind === "failed" && read.namedRefusals === true) {
    if (state.refusal === "not_found") return refuse("not_found", outcome.detail);
    if (state.refusal === "conflict") return refuse("conflict", outcome.detail);
  }
  if (state.kind !== "answered") return refuse("upstream_failed", outcome.detail);
  const bytes = Buffer.from(state.content, "base64");
  await ctx.reply
    .code(200)
    .type(contentType)
    .header("cache-control", "no-store")
    .header("x-kiln-truncated", String(state.truncated))
    .header("x-kiln-read-at", state.answeredAt)
    .send(bytes);
  return REPLY_SENT;
}

/** operator.hosts.journal: the newest bytes of the host's system journal. Audited. */
export const hostJournal: Handler<"operator.hosts.journal"> = (ctx) =>
  readFromHost(ctx, { kind: "journal" }, "text/plain; charset=utf-8");

/** operator.hosts.kernel_log: the newest bytes of the host's kernel log. Audited. */
export const hostKernelLog: Handler<"operator.hosts.kernel_log"> = (ctx) =>
  readFromHost(ctx, { kind: "kernel_log" }, "text/plain; charset=utf-8");

/** operator.hosts.evidence: one file of the host's evidence directory (never outside it). Audited. */
export const hostEvidence: Handler<"operator.hosts.evidence"> = (ctx) =>
  readFromHost(ctx, { kind: "evidence", path: ctx.query.path }, "application/octet-stream");

/** The most unit executions and record bytes one evidence export includes. */
export const EXPORT_MAX_EXECUTIONS = 100;
export const EXPORT_MAX_BYTES = 16 * 2 ** 20;
/** Record bytes an export includes unless the operator names fewer or more. */
export const EXPORT_DEFAULT_BYTES = 2 ** 20;

/**
 * operator.hosts.evidence_export: JSON lines of the host's current boot journal, its kiln units'
 * newest executions and the retained files of attempt `attempt`, bounded by `executions` and
 * `bytes`, naming every item left out (host/src/agent/export-evidence.ts). Bounds beyond
 * EXPORT_MAX_* are `invalid_request`; an attempt with no retained files `not_found`; a host that
 * rebooted during the export `conflict`; no answer `upstream_failed`. Audited.
 */
export const hostEvidenceExport: Handler<"operator.hosts.evidence_export"> = (ctx) => {
  const { attempt, executions, bytes } = ctx.query;
  if (executions !== undefined && executions > EXPORT_MAX_EXECUTIONS) {
    return refuse(
      "invalid_request",
      `query.executions ${executions} is over the most an export includes, ${EXPORT_MAX_EXECUTIONS}`,
    );
  }
  if (bytes !== undefined && bytes > EXPORT_MAX_BYTES) {
    return refuse("invalid_request", `query.bytes ${bytes} is over the most an export includes, ${EXPORT_MAX_BYTES}`);
  }
  return readFromHost(
    ctx,
    {
      kind: "evidence_export",
      ...(attempt === undefined ? {} : { attempt }),
      ...(executions === undefined ? {} : { executions }),
      maxBytes: bytes ?? EXPORT_DEFAULT_BYTES,
      namedRefusals: true,
    },
    "application/x-ndjson",
  );
};
