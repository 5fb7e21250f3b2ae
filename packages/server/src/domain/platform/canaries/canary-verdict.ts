import type { CanaryRecord } from "@kiln/storage";
import type { CanarySettings } from "./canary-settings.js";

/**
 * A canary's verdict, derived from its job on read (nothing about it is stored twice):
 * `passed` — the job passed before the canary was late; `failed` — the job failed or was
 * cancelled in time, or the public API refused the submission; `late` — not finished within
 * `lateAfterSeconds` of the platform reserving it (also a job that finished after that);
 * `pending` — still within its bound. The bound runs from the reservation rather than the slot's
 * start, so a canary reserved late in its slot (a loop pass delayed, a host that began serving
 * mid-slot) gets the whole bound.
 */
export type CanaryVerdict = "passed" | "failed" | "late" | "pending";

export function lateAtOf(canary: Pick<CanaryRecord, "createdAt">, settings: CanarySettings): Date {
  return new Date(Date.parse(canary.createdAt) + settings.lateAfterSeconds * 1000);
}

export function canaryVerdict(canary: CanaryRecord, now: Date, settings: CanarySettings): CanaryVerdict {
  const lateAt = lateAtOf(canary, settings).getTime();
  if (canary.submissionError !== null) return "failed";
  const finishedAt = canary.job?.finishedAt ?? null;
  if (finishedAt !== null) {
    if (Date.parse(finishedAt) >= lateAt) return "late";
    return canary.job?.status === "passed" ? "passed" : "failed";
  }
  return now.getTime() >= lateAt ? "late" : "pending";
}
