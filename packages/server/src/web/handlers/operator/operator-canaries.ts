import type { JobFailure, ResponseDocumentOf } from "@kiln/contract";
import { findCanaryByJob, readJob } from "@kiln/storage";
import type { Static } from "@sinclair/typebox";
import { parseAttemptReport } from "../../../domain/jobs/attempt-report.js";
import { storedJson } from "../../../domain/jobs/stored-json.js";
import { type CanarySettings, canarySettings } from "../../../domain/platform/canaries/canary-settings.js";
import { type CanaryVerdict, canaryVerdict, lateAtOf } from "../../../domain/platform/canaries/canary-verdict.js";
import { refuse } from "../../../domain/refusal.js";
import type { Handler } from "../../http/handler.js";

type Attribution = ResponseDocumentOf<"operator.canaries.attribution">;

const durationOf = (from: string, to: string | null) =>
  to === null ? null : Math.max(0, Date.parse(to) - Date.parse(from));

/**
 * Whom a canary's verdict is attributed to: a pass to its host (it ran the whole path); a failure
 * with cause `infrastructure` to the host that ran it, any other failure to the canary's own
 * cargo run (the workload); lateness to the targeted host (it never placed it, or did not finish
 * it in time); a pending canary to no one yet.
 */
function attribute(
  verdict: CanaryVerdict,
  failure: Static<typeof JobFailure> | null,
  host: string,
  settings: CanarySettings,
  lateAt: Date,
): { attributed_to: Attribution["attributed_to"]; reason: string } {
  switch (verdict) {
    case "passed":
      return { attributed_to: "host", reason: `the canary passed on ${host}: the host ran the whole job path` };
    case "pending":
      return { attributed_to: "undecided", reason: `still within its bound (late at ${lateAt.toISOString()})` };
    case "late":
      return {
        attributed_to: "host",
        reason: `${host} did not finish it within ${settings.lateAfterSeconds} s of being due (late at ${lateAt.toISOString()})`,
      };
    case "failed":
      return failure?.cause === "infrastructure"
        ? { attributed_to: "host", reason: `${host} failed it in phase ${failure.phase}: ${failure.detail}` }
        : {
            attributed_to: "workload",
            reason:
              failure === null
                ? "the canary job ended without passing"
                : `its cargo run failed in phase ${failure.phase} (${failure.cause}): ${failure.detail}`,
          };
  }
}

/**
 * operator.canaries.attribution: for a canary job, the host it targeted, each attempt with the
 * host that ran it, its phases and how long each took, the verdict and whom it is attributed to.
 * A job that is no canary is `operator_not_found` (the operation's refusals name no not_found).
 */
export const canaryAttribution: Handler<"operator.canaries.attribution"> = async (ctx) => {
  const jobId = ctx.params.job_id;
  const canary = await findCanaryByJob(ctx.db, jobId);
  const record = canary === undefined ? undefined : await readJob(ctx.db, { tenantId: canary.tenantId, jobId });
  if (canary === undefined || record === undefined) return refuse("operator_not_found", `job ${jobId} is no canary`);
  const settings = canarySettings(ctx.deps.canaries);
  const verdict = canaryVerdict(canary, ctx.now, settings);
  const failure = storedJson<Static<typeof JobFailure>>(record.job.failure);
  const attempts = record.attempts.map((a) => {
    const phases = (parseAttemptReport(a.report)?.phases ?? []).map((p) => ({
      name: p.name,
      status: p.status,
      duration_ms: p.duration_ms,
    }));
    return {
      attempt: a.number,
      host: a.host_id,
      state: a.state,
      outcome: a.outcome,
      started_at: a.started_at,
      finished_at: a.finished_at,
      duration_ms: durationOf(a.started_at, a.finished_at),
      phases,
    };
  });
  const evidence: Attribution["evidence"] = [
    {
      kind: "canary",
      detail: `due ${canary.dueAt} on ${canary.hostId}, submitted ${canary.submittedAt ?? "never"}, job ${record.job.status}`,
      reference: `job:${jobId}`,
      observed_at: ctx.now.toISOString(),
    },
    ...attempts.map((a) => ({
      kind: "attempt",
      detail: `attempt ${a.attempt} on ${a.host}: ${a.state}${a.outcome === null ? "" : ` ${a.outcome}`}${a.duration_ms === null ? "" : ` in ${a.duration_ms} ms`}${a.phases.length === 0 ? "" : ` (${a.phases.map((p) => `${p.name} ${p.status} ${p.duration_ms ?? "?"} ms`).join(", ")})`}`,
      reference: `job:${jobId}#${a.attempt}`,
      ...(a.finished_at === null ? {} : { observed_at: a.finished_at }),
    })),
    ...(failure === null
      ? []
      : [
          {
            kind: "failure",
            detail: `${failure.phase} (${failure.cause}): ${failure.detail}`,
            reference: `job:${jobId}`,
          },
        ]),
  ];
  const unit = attempts.at(-1);
  return {
    job_id: jobId,
    host: canary.hostId,
    ...(unit === undefined ? {} : { vm_id: `${jobId}-a${unit.attempt}` }),
    verdict,
    ...attribute(verdict, failure, canary.hostId, settings, lateAtOf(canary, settings)),
    evidence,
    due_at: canary.dueAt,
    submitted_at: canary.submittedAt,
    attempts,
  };
};
