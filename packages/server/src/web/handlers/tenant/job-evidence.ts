import type { JobEvidence } from "@kiln/contract";
import { type AttemptRow, InvalidCursorError, type JobRecord, readJob } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { mergeAttemptReports, parseAttemptReport } from "../../../domain/jobs/attempt-report.js";
import { jobView } from "../../../domain/jobs/job-view.js";
import { storedJson } from "../../../domain/jobs/stored-json.js";
import { refuse } from "../../../domain/refusal.js";
import { type BaseContext, type Handler, principalOf, REPLY_SENT } from "../../http/handler.js";

type Evidence = Static<typeof JobEvidence>;

/** Attempt evidence entries per page of JobEvidence.attempts. */
export const ATTEMPT_PAGE_SIZE = 50;

/** The job a `/api/jobs/{id}/…` path names, of the caller's tenant, or not_found. */
export async function tenantJob(ctx: BaseContext & { readonly params: { readonly id: string } }): Promise<JobRecord> {
  const id = ctx.params.id;
  const record = await readJob(ctx.db, { tenantId: principalOf(ctx).tenantId, jobId: id });
  return record ?? refuse("not_found", `no job ${id}`);
}

/** `a<attempt>`: the last attempt number of the previous page. */
function decodeAttemptCursor(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  const m = /^a(\d{1,9})$/.exec(cursor);
  if (m?.[1] === undefined) throw new InvalidCursorError("cursor");
  return Number(m[1]);
}

function attemptEvidence(jobId: string, attempt: AttemptRow): NonNullable<Evidence["attempts"]>["attempts"][number] {
  const unit = parseAttemptReport(attempt.report)?.unit ?? null;
  // Members the open record carries beyond those the contract names.
  const more = { host: attempt.host_id, state: attempt.state, cargo_output_sha256: attempt.cargo_output_sha256 };
  return {
    ...more,
    attempt: attempt.number,
    unit: unit?.id ?? `${jobId}-a${attempt.number}`,
    started_at: attempt.started_at,
    finished_at: attempt.finished_at,
    outcome: attempt.outcome,
    exit_code: attempt.exit_code,
    cargo_output_bytes: attempt.cargo_output_bytes,
  };
}

/**
 * jobs.evidence: the closed JobEvidence. The report merges every attempt's stored
 * report (attempt-report.ts); usage and settlement are the job's own JSON once written;
 * attempts is a page of ATTEMPT_PAGE_SIZE from `cursor`, null before the first attempt.
 */
export const jobEvidence: Handler<"jobs.evidence"> = async (ctx) => {
  const after = decodeAttemptCursor(ctx.query.cursor);
  const record = await tenantJob(ctx);
  const job = record.job;
  let attempts: Evidence["attempts"] = null;
  if (record.attempts.length > 0) {
    const rest = record.attempts.filter((a) => a.number > after);
    const page = rest.slice(0, ATTEMPT_PAGE_SIZE);
    const last = page.at(-1);
    attempts = {
      attempts: page.map((a) => attemptEvidence(job.id, a)),
      next_cursor: rest.length > page.length && last !== undefined ? `a${last.number}` : null,
    };
  }
  return {
    job: jobView(record),
    report: mergeAttemptReports(record),
    usage: storedJson<Evidence["usage"]>(job.usage),
    attempts,
    settlement: storedJson<Evidence["settlement"]>(job.settlement),
  };
};

/**
 * Sends a stored blob as the reply's bytes (streamed from the blob store, with its
 * length); undefined when the blob store does not hold it, so the caller refuses.
 */
export async function sendBlob(
  ctx: BaseContext,
  sha256: string,
  headers: Readonly<Record<string, string>> = {},
): Promise<typeof REPLY_SENT | undefined> {
  const opened = await ctx.deps.blobs.openRead(sha256);
  if (opened === undefined) return undefined;
  void ctx.reply
    .code(200)
    .type("application/octet-stream")
    .header("content-length", String(opened.bytes))
    .header("cache-control", "private, no-cache");
  for (const [name, value] of Object.entries(headers)) void ctx.reply.header(name, value);
  await ctx.reply.send(opened.stream);
  return REPLY_SENT;
}

/** jobs.cargo_output: the attempt's retained Cargo output, byte for byte. */
export const jobCargoOutput: Handler<"jobs.cargo_output"> = async (ctx) => {
  const record = await tenantJob(ctx);
  const number = ctx.params.attempt;
  const attempt = record.attempts.find((a) => a.number === number);
  if (attempt === undefined) return refuse("not_found", `job ${record.job.id} has no attempt ${number}`);
  const sent = attempt.cargo_output_sha256 === null ? undefined : await sendBlob(ctx, attempt.cargo_output_sha256);
  return sent ?? refuse("not_found", `attempt ${number} of job ${record.job.id} retained no Cargo output`);
};
