import type { CanaryRecord, HostCapacityObservation } from "@kiln/storage";
import { type CanarySettings, canarySlotOf } from "../canaries/canary-settings.js";
import { type CanaryVerdict, canaryVerdict } from "../canaries/canary-verdict.js";
import { servingOf } from "../host-serving.js";
import { type OperatingStatesDocument, operatingState, type ReasonCode } from "./operating-state.js";

type HostJudgement = {
  host: string;
  canary: CanaryRecord | null;
  verdict: CanaryVerdict | "none";
  stale: boolean;
};

/**
 * A host's judgement: its newest decided canary (a pending one does not hide the verdict before
 * it), or its pending one when none is decided yet. A passed canary is stale once it was due
 * more than one interval plus the late bound ago — the loop has not judged the host since.
 */
function judge(hostId: string, canaries: readonly CanaryRecord[], now: Date, settings: CanarySettings): HostJudgement {
  const own = canaries.filter((c) => c.hostId === hostId);
  let pending: CanaryRecord | null = null;
  for (const canary of own) {
    const verdict = canaryVerdict(canary, now, settings);
    if (verdict === "pending") {
      pending ??= canary;
      continue;
    }
    const staleBefore = now.getTime() - (settings.intervalSeconds + settings.lateAfterSeconds) * 1000;
    return { host: hostId, canary, verdict, stale: Date.parse(canary.dueAt) < staleBefore };
  }
  return { host: hostId, canary: pending, verdict: pending === null ? "none" : "pending", stale: false };
}

/**
 * End-to-end workload health from canaries: healthy when every serving host's newest decided
 * canary passed and is recent; refusing otherwise, with the worst reason first (no serving host,
 * a failed canary, a late one, one still pending with nothing decided, a stale pass). The
 * deadline is when the next canary's verdict is due: its slot's start plus the late bound.
 */
export function workloadHealth(
  hosts: readonly HostCapacityObservation[],
  canaries: readonly CanaryRecord[],
  now: Date,
  settings: CanarySettings,
): OperatingStatesDocument["end_to_end_workload_health"] {
  const serving = hosts.filter((h) => servingOf(h, now).serving);
  const judgements = serving.map((h) => judge(h.id, canaries, now, settings));
  const nextVerdictDue = new Date(
    canarySlotOf(now, settings).getTime() + (settings.intervalSeconds + settings.lateAfterSeconds) * 1000,
  );
  const refusal = (code: ReasonCode<"end_to_end_workload_health">, detail: string) =>
    operatingState("end_to_end_workload_health", { now, code, detail, refusingUntil: nextVerdictDue });
  const describe = (j: HostJudgement) =>
    j.canary === null
      ? `${j.host}: no canary yet`
      : `${j.host}: canary ${j.canary.id} due ${j.canary.dueAt} ${j.verdict}${j.canary.jobId === null ? "" : ` (job ${j.canary.jobId}, ${j.canary.job?.status ?? "not submitted"})`}${j.canary.submissionError === null ? "" : ` — ${j.canary.submissionError}`}`;
  const of = (verdict: HostJudgement["verdict"]) => judgements.filter((j) => j.verdict === verdict);
  let base: ReturnType<typeof refusal>;
  if (settings.off === true) {
    // Not a failing canary with a deadline: nothing is measured, and the operator chose that.
    base = operatingState("end_to_end_workload_health", {
      now,
      code: "canaries_off",
      detail:
        "not measured: canaries are off in this deployment (KILN_CANARY_INTERVAL_SECONDS=0); set an interval to measure end-to-end workload health",
      refusingUntil: null,
    });
  } else if (serving.length === 0) {
    base = refusal(
      "no_serving_host",
      hosts.length === 0
        ? "no host is enrolled: no canary can run"
        : `no host serves (every one drained or not seen lately): no canary can run`,
    );
  } else if (of("failed").length > 0) {
    base = refusal("canary_failed", of("failed").map(describe).join("; "));
  } else if (of("late").length > 0) {
    base = refusal(
      "canary_late",
      `not finished within ${settings.lateAfterSeconds} s of being due: ${of("late").map(describe).join("; ")}`,
    );
  } else if (of("pending").length > 0 || of("none").length > 0) {
    base = refusal(
      "canary_pending",
      `no canary decided yet: ${[...of("pending"), ...of("none")].map(describe).join("; ")}`,
    );
  } else if (judgements.some((j) => j.stale)) {
    base = refusal(
      "canary_stale",
      `the newest canary verdict is older than one interval: ${judgements
        .filter((j) => j.stale)
        .map(describe)
        .join("; ")}`,
    );
  } else {
    base = operatingState("end_to_end_workload_health", {
      now,
      code: "canaries_passing",
      detail: `every serving host's newest canary passed: ${judgements.map(describe).join("; ")}`,
      refusingUntil: null,
    });
  }
  return {
    ...base,
    canary_interval_seconds: settings.intervalSeconds,
    canary_late_after_seconds: settings.lateAfterSeconds,
    canaries: judgements.flatMap((j) =>
      j.canary === null || j.verdict === "none"
        ? []
        : [{ host: j.host, canary: j.canary.id, job_id: j.canary.jobId, due_at: j.canary.dueAt, verdict: j.verdict }],
    ),
  };
}
